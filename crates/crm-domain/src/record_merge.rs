//! Merging contacts and companies (decisions §18, §23, §24): which ids a merge may name, which
//! values the survivor takes from the merged records, and what becomes of the merged contacts'
//! sequence enrollments.
//!
//! The field-fill rule: the survivor keeps every value it has; a built-in or custom field empty on
//! it takes the first non-empty value among the merged records, in the order the client gave
//! them. Empty is absent, `null`, blank text or an empty list.

use std::collections::HashSet;

use serde_json::Value;

use crate::{
    error::ValidationError,
    sequence::{Enrollment, ExitReason, SourceObject},
    Company, Contact, ContactId, JsonMap, SequenceId, Timestamp,
};

/// The most records one merge takes in.
pub const MAX_MERGE_IDS: usize = 10;

/// The `merge_ids` of a merge into `survivor`: 1 to [`MAX_MERGE_IDS`] ids, none equal to the
/// survivor's, none repeated (422 `validation_failed`, `field: "merge_ids"`).
pub fn check_merge_ids(survivor: &str, ids: &[String]) -> Result<(), ValidationError> {
    let invalid = |detail: String| ValidationError::invalid("merge_ids", detail);
    if ids.is_empty() || ids.len() > MAX_MERGE_IDS {
        return Err(invalid(format!(
            "must hold 1 to {MAX_MERGE_IDS} ids, not {}",
            ids.len()
        )));
    }
    let mut seen = HashSet::new();
    for id in ids {
        if id == survivor {
            return Err(invalid(format!(
                "`{id}` is the record merged into; it cannot be merged into itself"
            )));
        }
        if !seen.insert(id.as_str()) {
            return Err(invalid(format!("`{id}` is given twice")));
        }
    }
    Ok(())
}

/// Whether a custom field's value counts as empty.
pub fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Fills an empty `slot` with the first of `sources` that has a value; whether it did.
fn fill<'a, T: Clone + 'a>(
    slot: &mut Option<T>,
    sources: impl IntoIterator<Item = &'a Option<T>>,
) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = sources.into_iter().find_map(Clone::clone);
    slot.is_some()
}

/// Fills the empty custom fields of `target` from `sources` in order; whether any was filled.
fn fill_custom<'a>(target: &mut JsonMap, sources: impl IntoIterator<Item = &'a JsonMap>) -> bool {
    let mut changed = false;
    for source in sources {
        for (key, value) in source {
            if is_empty_value(value) {
                continue;
            }
            if target.get(key).is_none_or(is_empty_value) {
                target.insert(key.clone(), value.clone());
                changed = true;
            }
        }
    }
    changed
}

/// Applies the field-fill rule to `survivor` from `merged` (in the order given) and returns the
/// names of the fields it filled (`custom_fields` once for any custom field), as an update's
/// `changed_fields` names them.
pub fn fill_contact(survivor: &mut Contact, merged: &[&Contact]) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut take = |name: &'static str, filled: bool| {
        if filled {
            changed.push(name);
        }
    };
    take(
        "first_name",
        fill(
            &mut survivor.first_name,
            merged.iter().map(|m| &m.first_name),
        ),
    );
    take(
        "last_name",
        fill(&mut survivor.last_name, merged.iter().map(|m| &m.last_name)),
    );
    take(
        "email",
        fill(&mut survivor.email, merged.iter().map(|m| &m.email)),
    );
    take(
        "phone",
        fill(&mut survivor.phone, merged.iter().map(|m| &m.phone)),
    );
    take(
        "linkedin_url",
        fill(
            &mut survivor.linkedin_url,
            merged.iter().map(|m| &m.linkedin_url),
        ),
    );
    take(
        "company_id",
        fill(
            &mut survivor.company_id,
            merged.iter().map(|m| &m.company_id),
        ),
    );
    take(
        "type",
        fill(
            &mut survivor.contact_type,
            merged.iter().map(|m| &m.contact_type),
        ),
    );
    take(
        "owner_id",
        fill(&mut survivor.owner_id, merged.iter().map(|m| &m.owner_id)),
    );
    take(
        "custom_fields",
        fill_custom(
            &mut survivor.custom_fields,
            merged.iter().map(|m| &m.custom_fields),
        ),
    );
    changed
}

/// [`fill_contact`] for companies (`name` is never empty, so only `domain`, the owner and
/// custom fields can be filled).
pub fn fill_company(survivor: &mut Company, merged: &[&Company]) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if fill(&mut survivor.domain, merged.iter().map(|m| &m.domain)) {
        changed.push("domain");
    }
    if fill(&mut survivor.owner_id, merged.iter().map(|m| &m.owner_id)) {
        changed.push("owner_id");
    }
    if fill_custom(
        &mut survivor.custom_fields,
        merged.iter().map(|m| &m.custom_fields),
    ) {
        changed.push("custom_fields");
    }
    changed
}

/// What becomes of the merged contacts' enrollments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnrollmentPlan {
    /// Enrollments that now belong to the survivor (contact, and a contact source, rewritten).
    pub moved: Vec<Enrollment>,
    /// Active enrollments that would duplicate one the survivor has: ended with `merged`.
    pub exited: Vec<Enrollment>,
}

/// Moves the enrollments of merged contacts (`merged`, in the order of `merge_ids`) to
/// `survivor`, who is already enrolled in `survivor_sequences`. A contact is enrolled at most
/// once per sequence, so the first enrollment in a sequence the survivor lacks moves; any other
/// stays with its tombstone, ending with reason `merged` when it is still active.
pub fn plan_enrollments(
    survivor: &ContactId,
    survivor_sequences: &[SequenceId],
    merged: Vec<Enrollment>,
    now: Timestamp,
) -> EnrollmentPlan {
    let mut taken: HashSet<SequenceId> = survivor_sequences.iter().cloned().collect();
    let mut plan = EnrollmentPlan::default();
    for mut e in merged {
        if taken.contains(&e.sequence_id) {
            if e.exit(ExitReason::Merged, now) {
                plan.exited.push(e);
            }
            continue;
        }
        taken.insert(e.sequence_id.clone());
        if e.source_object == SourceObject::Contact && e.source_id == e.contact_id.as_str() {
            e.source_id = survivor.as_str().to_owned();
        }
        e.contact_id = survivor.clone();
        e.updated_at = now;
        plan.moved.push(e);
    }
    plan
}

#[cfg(test)]
mod tests;
