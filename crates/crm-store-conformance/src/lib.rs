//! One conformance suite for every store adapter, so the SQLite and Postgres stores cannot drift.
//!
//! An adapter's tests call [`conformance_suite!`] with an async expression that yields a fresh,
//! migrated, empty `Arc<dyn Store>`; every case below becomes its own `#[tokio::test]`.
//! Also here: how tests find a Postgres server ([`postgres_admin_url`]).

pub mod activity_cases;
pub mod audit_cases;
pub mod automation_cases;
pub mod bulk_import_cases;
pub mod cases;
pub mod company_cases;
pub mod config_cases;
pub mod contact_cases;
pub mod deal_cases;
pub mod email_cases;
pub mod event_cases;
pub mod export_cases;
mod fixtures;
pub mod history_cases;
pub mod idempotency_cases;
pub mod import_cases;
pub mod key_cases;
pub mod merge_cases;
pub mod owner_cases;
pub mod pipeline_cases;
pub mod plan_cases;
pub mod record_cases;
pub mod registry_cases;
pub mod search_cases;
pub mod secret_cases;
pub mod sequence_cases;
pub mod session_cases;
pub mod tx_cases;
pub mod user_cases;
pub mod webhook_cases;
pub mod workspace_cases;

pub use fixtures::*;
pub use secret_cases::test_secrets;

/// Where tests reach Postgres: `CRM_TEST_DATABASE_URL`, else the local server on 127.0.0.1:5432
/// as user `postgres` (trust auth). `cargo xtask test` starts a throwaway cluster with `initdb`
/// and sets the variable when neither is there. Tests never skip silently: when the server cannot
/// be reached they fail with [`POSTGRES_HELP`].
pub fn postgres_admin_url() -> String {
    std::env::var("CRM_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

pub const POSTGRES_HELP: &str = "these tests need Postgres: set CRM_TEST_DATABASE_URL=postgres://user@host:port/db, \
run a server on 127.0.0.1:5432 (user postgres, trust auth), or run `cargo xtask test`, which starts a throwaway \
cluster with initdb when one is installed";

/// Expands to one `#[tokio::test]` per conformance case. `$factory` is an async expression
/// evaluating to a fresh `Arc<dyn crm_app::Store>`.
#[macro_export]
macro_rules! conformance_suite {
    ($factory:expr) => {
        $crate::conformance_suite!(@cases $factory;
            workspace_and_keys_round_trip,
            contact_round_trips_every_field,
            duplicate_email_is_reported_and_the_transaction_stays_usable,
            insert_checks_references_first_and_leaves_the_transaction_usable,
            a_contact_inserted_alone_comes_with_its_queued_event_or_not_at_all,
            contacts_inserted_together_skip_taken_emails_and_missing_companies,
            email_is_unique_per_tenant_only,
            update_checks_the_version,
            update_to_a_taken_email_is_a_duplicate,
            contacts_list_newest_first_in_slices,
            contact_filters_match,
            custom_field_filters_match_newest_first_and_follow_writes,
            like_wildcards_in_q_are_literal,
            soft_deleted_contacts_are_listed_only_on_request,
            company_round_trip_update_and_filters,
            tenants_never_see_each_other,
            registry_groups_and_values_are_idempotent_and_ordered,
            events_are_listed_newest_first_by_type,
            events_inserted_together_read_back_as_one_by_one,
            history_lists_a_records_entries_newest_first_in_its_tenant,
            audit_entries_round_trip_filter_page_and_stay_in_their_tenant,
            retention_settings_round_trip_and_old_history_goes,
            erasing_a_contact_removes_it_and_scrubs_what_holds_it,
            events_and_changes_are_written_together,
            merges_repoint_references_and_tombstones_free_their_email,
            idempotency_records_round_trip,
            a_claim_of_this_process_is_alive,
            a_dropped_write_transaction_rolls_back,
            record_exists_sees_soft_deleted_records,
            companies_by_ids_reads_the_tenants_companies_soft_deleted_too,
            pipelines_round_trip_by_id_and_key_with_unique_keys,
            pipeline_updates_check_the_version_and_default_moves,
            deals_round_trip_and_filter,
            deal_updates_check_the_version_and_stage_moves_keep_types,
            activities_list_newest_first_by_occurrence,
            substring_search_matches_short_and_long_needles,
            a_search_finds_matches_among_old_rows_newest_first_across_pages,
            savepoints_undo_part_of_a_transaction,
            custom_fields_register_once_in_order_per_object,
            object_types_register_once_in_order,
            concurrent_registrations_keep_registration_order,
            registry_fields_and_types_stay_in_their_tenant,
            keys_are_listed_per_tenant_newest_first_and_their_state_updates,
            touching_keys_only_ever_raises_last_used_at,
            workspace_plan_and_settings_update,
            usage_counts_add_up_per_tenant_and_period,
            leases_reserve_until_they_expire,
            webhooks_round_trip_and_stay_in_their_tenant,
            fan_out_makes_one_delivery_per_matching_webhook_of_the_tenant,
            claims_hold_a_lease_and_record_only_under_it,
            a_batch_of_outcomes_records_exactly_the_ones_still_held,
            concurrent_claims_and_fan_outs_never_overlap,
            automations_round_trip_update_and_delete_with_their_runs,
            active_automations_are_the_enabled_ones_for_the_events_oldest_first,
            connections_and_templates_round_trip_per_tenant,
            emails_list_newest_first_with_filters,
            due_emails_are_claimed_once_until_the_claim_expires,
            concurrent_claimers_never_share_an_email,
            sequences_round_trip_update_count_and_delete,
            triggered_sequences_are_the_enabled_ones_for_the_events_oldest_first,
            enrollments_are_unique_per_sequence_and_contact_and_end_by_source_or_sequence,
            due_enrollments_are_locked_earliest_first_advanced_once_and_held_back,
            concurrent_rounds_never_lock_the_same_enrollment,
            secrets_are_stored_sealed_and_read_back_plain,
            the_first_start_seals_plaintext_then_checks_and_rotation_reseals,
            a_webhook_whose_secret_does_not_open_holds_up_no_other_delivery,
            config_changes_reach_this_process_at_commit,
            imports_round_trip_and_stay_in_their_tenant,
            import_chunks_and_errors_are_kept_until_dropped,
            imports_are_claimed_once_under_a_lease_only_its_token_renews,
            concurrent_import_claimers_never_share_an_import,
            purging_drops_old_errors_and_cut_off_uploads,
            contacts_are_found_by_their_emails_in_one_read,
            contacts_updated_together_are_written_only_at_their_stored_version,
            import_keys_are_kept_per_import_until_its_chunks_go,
            users_round_trip_list_in_their_workspace_and_keep_emails_unique,
            a_users_newest_sign_in_link_alone_works_and_only_once,
            a_login_is_stamped_on_the_user_as_it_is_now,
            sessions_round_trip_every_field_and_are_found_only_by_their_hash,
            touching_a_session_or_setting_its_mode_changes_that_session_alone,
            a_session_is_deleted_once_and_alone,
            deleting_a_users_sessions_removes_theirs_alone_and_counts_them,
            sessions_created_before_a_time_are_deleted_and_no_others,
            session_sign_in_failures_count_per_email_and_address_from_a_time_until_forgotten,
            exports_round_trip_with_their_chunks_and_stay_in_their_tenant,
            exports_are_claimed_once_under_a_lease_only_its_token_renews,
            purging_drops_expired_exports_with_their_chunks,
            owners_round_trip_on_every_write_of_contacts_companies_and_deals,
            lists_filter_by_owner_on_every_path,
            stage_totals_count_only_an_owners_deals_when_asked,
            an_owner_reference_names_a_user_of_the_tenants_workspace,
            owner_exists_finds_the_users_of_the_tenants_workspace_alone,
            clearing_an_owner_frees_that_users_records_in_the_tenant_alone
        );
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store: std::sync::Arc<dyn crm_app::Store> = $factory.await;
                $crate::cases::$case(store).await;
            }
        )*
    };
}
