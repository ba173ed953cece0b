//! The pieces most statements start or end with: the tenant, a page of rows, an optional filter.

use crm_app::ports::Slice;
use crm_domain::Tenant;
use sqlx::QueryBuilder;

use crate::{sql::PushArg, Arg, Sql, SqlQuery};

/// `sql` with the tenant bound as `$1` (workspace) and `$2` (mode), which every tenant-scoped
/// statement starts with.
#[inline]
pub fn tenant_query<'q, DB: Sql>(sql: &'q str, tenant: &'q Tenant) -> SqlQuery<'q, DB> {
    sqlx::query::<DB>(sql)
        .arg(tenant.workspace_id.as_str())
        .arg(tenant.mode.as_str())
}

/// ` WHERE workspace_id = .. AND mode = ..`.
pub fn tenant_where<'a, DB: Sql>(qb: &mut QueryBuilder<'a, DB>, tenant: &'a Tenant) {
    qb.push(" WHERE workspace_id = ")
        .push_arg(tenant.workspace_id.as_str())
        .push(" AND mode = ")
        .push_arg(tenant.mode.as_str());
}

/// ` AND <column> = value` when a list filters on `value`; nothing when it does not.
pub fn and_equals<'a, DB: Sql>(
    qb: &mut QueryBuilder<'a, DB>,
    column: &str,
    value: Option<&'a str>,
) {
    if let Some(value) = value {
        qb.push(" AND ").push(column).push(" = ").push_arg(value);
    }
}

/// A page of rows newest first: ids below the cursor, at most the slice's limit.
pub fn slice_clause<'a, DB: Sql>(qb: &mut QueryBuilder<'a, DB>, slice: &'a Slice) {
    slice_clause_on(qb, "id", slice);
}

/// [`slice_clause`] on the id column `id` (qualified when the query joins).
pub fn slice_clause_on<'a, DB: Sql>(qb: &mut QueryBuilder<'a, DB>, id: &str, slice: &'a Slice) {
    if let Some(before) = &slice.before {
        qb.push(" AND ")
            .push(id)
            .push(" < ")
            .push_arg(before.as_str());
    }
    qb.push(" ORDER BY ")
        .push(id)
        .push(" DESC LIMIT ")
        .push_arg(i64::from(slice.limit));
}
