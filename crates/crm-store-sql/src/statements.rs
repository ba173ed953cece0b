//! The insert and update texts that differ between the backends only in the cast after a JSON
//! parameter (the backend's [`Unit::JSON`]). [`impl_statements!`] writes each of them once,
//! `concat!`ed with the cast at compile time, so creating a deal or moving its stage formats no
//! statement at run time.

use crate::Unit;

/// A store's texts of the statements below; [`impl_statements!`] writes them.
pub trait Statements: Unit {
    const INSERT_DEAL: &'static str;
    const UPDATE_DEAL: &'static str;
    const INSERT_COMPANY: &'static str;
    const UPDATE_COMPANY: &'static str;
    const INSERT_ACTIVITY: &'static str;
    const UPDATE_ACTIVITY: &'static str;
    const INSERT_PIPELINE: &'static str;
    const UPDATE_PIPELINE: &'static str;
}

/// Whether two texts are the same, at compile time (`==` on `str` is not `const`).
#[doc(hidden)]
pub const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `impl Statements for $tx`, `$json` being its `Unit::JSON` as a literal (`""` or
/// `"::jsonb"`; checked at compile time).
#[macro_export]
macro_rules! impl_statements {
    ($tx:ty, json = $json:literal) => {
        const _: () = assert!(
            $crate::statements::same(<$tx as $crate::Unit>::JSON, $json),
            "the literal must be the backend's Unit::JSON"
        );

        impl $crate::statements::Statements for $tx {
            const INSERT_DEAL: &'static str = concat!(
                "INSERT INTO deals (workspace_id, mode, id, title, pipeline_id, pipeline_key, stage, stage_type, \
                 primary_contact_id, company_id, value_cents, currency, close_date, owner_id, custom_fields, \
                 updated_at, version, deleted_at, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15", $json,
                ", $16, $17, $18, $19)"
            );
            const UPDATE_DEAL: &'static str = concat!(
                "UPDATE deals SET title = $4, pipeline_id = $5, pipeline_key = $6, stage = $7, stage_type = $8, \
                 primary_contact_id = $9, company_id = $10, value_cents = $11, currency = $12, close_date = $13, \
                 owner_id = $14, custom_fields = $15", $json, ", updated_at = $16, version = $17, deleted_at = $18 \
                 WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $19"
            );
            const INSERT_COMPANY: &'static str = concat!(
                "INSERT INTO companies (workspace_id, mode, id, created_at, name, domain, owner_id, custom_fields, \
                 updated_at, version, deleted_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8", $json, ", $9, $10, $11)"
            );
            const UPDATE_COMPANY: &'static str = concat!(
                "UPDATE companies SET name = $5, domain = $6, owner_id = $7, custom_fields = $8", $json,
                ", updated_at = $9, version = $10, deleted_at = $11 \
                 WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $4"
            );
            const INSERT_ACTIVITY: &'static str = concat!(
                "INSERT INTO activities (workspace_id, mode, id, type, contact_id, deal_id, body, occurred_at, \
                 custom_fields, updated_at, version, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9", $json, ", $10, $11, $12)"
            );
            const UPDATE_ACTIVITY: &'static str = concat!(
                "UPDATE activities SET type = $4, contact_id = $5, deal_id = $6, body = $7, occurred_at = $8, \
                 custom_fields = $9", $json, ", updated_at = $10, version = $11 \
                 WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $12"
            );
            const INSERT_PIPELINE: &'static str = concat!(
                "INSERT INTO pipelines (workspace_id, mode, id, key, created_at, name, is_default, stages, \
                 updated_at, version) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8", $json, ", $9, $10) ON CONFLICT DO NOTHING"
            );
            const UPDATE_PIPELINE: &'static str = concat!(
                "UPDATE pipelines SET name = $5, is_default = $6, stages = $7", $json,
                ", updated_at = $8, version = $9 \
                 WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $4"
            );
        }
    };
}
