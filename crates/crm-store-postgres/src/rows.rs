//! Row → record mapping: the decoders and column lists both stores share.

pub(crate) use crm_store_sql::{
    corrupt,
    rows::{
        activity, api_key, company, contact, deal, enum_value, field_def, get, idem_record,
        pipeline, tenant_of, workspace, ACTIVITY_COLUMNS, COMPANY_COLUMNS, CONTACT_COLUMNS,
        DEAL_COLUMNS, IDEM_COLUMNS, KEY_COLUMNS, PIPELINE_COLUMNS, WORKSPACE_COLUMNS,
    },
    stages_json,
};
