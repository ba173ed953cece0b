//! Every case by name, for [`conformance_suite!`](crate::conformance_suite): one module per port
//! holds its cases, and this one gathers them.

pub use crate::activity_cases::*;
pub use crate::audit_cases::*;
pub use crate::automation_cases::*;
pub use crate::bulk_import_cases::*;
pub use crate::company_cases::*;
pub use crate::config_cases::config_changes_reach_this_process_at_commit;
pub use crate::contact_cases::*;
pub use crate::deal_cases::*;
pub use crate::email_cases::*;
pub use crate::event_cases::*;
pub use crate::export_cases::*;
pub use crate::history_cases::*;
pub use crate::idempotency_cases::{
    a_claim_of_this_process_is_alive, idempotency_records_round_trip,
};
pub use crate::import_cases::*;
pub use crate::key_cases::*;
pub use crate::merge_cases::*;
pub use crate::owner_cases::*;
pub use crate::pipeline_cases::*;
pub use crate::plan_cases::*;
pub use crate::record_cases::*;
pub use crate::registry_cases::*;
pub use crate::search_cases::*;
pub use crate::secret_cases::{
    a_webhook_whose_secret_does_not_open_holds_up_no_other_delivery,
    secrets_are_stored_sealed_and_read_back_plain,
    the_first_start_seals_plaintext_then_checks_and_rotation_reseals,
};
pub use crate::sequence_cases::*;
pub use crate::session_cases::*;
pub use crate::tx_cases::*;
pub use crate::user_cases::*;
pub use crate::webhook_cases::*;
pub use crate::workspace_cases::*;
