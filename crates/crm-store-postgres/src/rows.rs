//! Row → record mapping: the decoders and column lists both stores share.

pub(crate) use crm_store_sql::{
    corrupt,
    rows::{
        company, contact, deal, get, idem_record, tenant_of, COMPANY_COLUMNS, CONTACT_COLUMNS,
        DEAL_COLUMNS, IDEM_COLUMNS,
    },
};
