//! Finished tasks, kept in memory so `GetTask` can return them: the newest ones, bounded in count
//! and in bytes, each visible only to callers of the workspace and mode that created it.
//!
//! Memory only, by choice: a task is the answer to one request, already returned in full by
//! `SendMessage`, so losing old ones (or, behind a load balancer, asking another process) costs a
//! client nothing it did not have; keeping them in the database would make every agent call a
//! second write.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
};

use crm_domain::Tenant;

use crate::task::Task;

/// Tasks kept at most, across all tenants.
pub const MAX_TASKS: usize = 10_000;
/// Approximate bytes of task JSON kept at most: a list result can be large, and 10,000 of them
/// must not exhaust the process.
pub const MAX_BYTES: usize = 64 * 1024 * 1024;

type Key = (Tenant, String);

pub struct TaskStore {
    max_tasks: usize,
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<Key, (Arc<Task>, usize)>,
    /// Insertion order, oldest first: the eviction order.
    order: VecDeque<Key>,
    bytes: usize,
}

impl TaskStore {
    pub fn new(max_tasks: usize, max_bytes: usize) -> TaskStore {
        TaskStore {
            max_tasks,
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn insert(&self, tenant: &Tenant, task: Task) {
        let size = approximate_size(&task);
        let key = (tenant.clone(), task.id.clone());
        // A panic elsewhere while holding the lock leaves the maps consistent (every update
        // below is completed before the next starts), so a poisoned lock is still usable.
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, old)) = inner.tasks.insert(key.clone(), (Arc::new(task), size)) {
            inner.bytes -= old;
            inner.order.retain(|k| k != &key);
        }
        inner.order.push_back(key);
        inner.bytes += size;
        while inner.tasks.len() > self.max_tasks
            || (inner.bytes > self.max_bytes && inner.tasks.len() > 1)
        {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            if let Some((_, size)) = inner.tasks.remove(&oldest) {
                inner.bytes -= size;
            }
        }
    }

    /// The task `id` of `tenant`; another tenant's task is not found, as a record would not be.
    pub fn get(&self, tenant: &Tenant, id: &str) -> Option<Arc<Task>> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .tasks
            .get(&(tenant.clone(), id.to_owned()))
            .map(|(task, _)| task.clone())
    }

    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tasks
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn approximate_size(task: &Task) -> usize {
    let json = |v: &serde_json::Value| serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
    let outcome = match &task.outcome {
        crate::task::Outcome::Completed { body, .. } => json(body),
        crate::task::Outcome::Failed { problem } | crate::task::Outcome::Rejected { problem } => {
            json(problem)
        }
    };
    outcome + json(&task.request) + 256
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Outcome;
    use crm_domain::{Mode, WorkspaceId};
    use serde_json::json;

    fn tenant(n: u32, mode: Mode) -> Tenant {
        let workspace_id = WorkspaceId::parse(&format!("ws_{n:0>26}")).expect("a well-formed id");
        Tenant { workspace_id, mode }
    }

    fn task(id: &str, body_len: usize) -> Task {
        Task {
            id: id.into(),
            context_id: "c".into(),
            tool: None,
            outcome: Outcome::Completed {
                body: json!({"x": "y".repeat(body_len)}),
                status: 200,
            },
            request: json!({}),
            answer_id: "a".into(),
            timestamp: "t".into(),
        }
    }

    #[test]
    fn a_task_is_visible_only_to_its_own_workspace_and_mode() {
        let store = TaskStore::new(10, MAX_BYTES);
        let owner = tenant(1, Mode::Test);
        store.insert(&owner, task("t1", 1));
        assert!(store.get(&owner, "t1").is_some());
        assert!(store.get(&tenant(1, Mode::Live), "t1").is_none());
        assert!(store.get(&tenant(2, Mode::Test), "t1").is_none());
        assert!(store.get(&owner, "t2").is_none());
    }

    #[test]
    fn the_oldest_tasks_leave_first_when_the_count_is_reached() {
        let store = TaskStore::new(3, MAX_BYTES);
        let t = tenant(1, Mode::Test);
        for i in 0..5 {
            store.insert(&t, task(&format!("t{i}"), 1));
        }
        assert_eq!(store.len(), 3);
        assert!(store.get(&t, "t1").is_none());
        assert!(store.get(&t, "t2").is_some() && store.get(&t, "t4").is_some());
    }

    #[test]
    fn the_oldest_tasks_leave_first_when_the_bytes_are_reached() {
        let store = TaskStore::new(100, 3_000);
        let t = tenant(1, Mode::Test);
        for i in 0..4 {
            store.insert(&t, task(&format!("t{i}"), 1_000));
        }
        assert!(store.len() < 4);
        assert!(store.get(&t, "t3").is_some());
        assert!(store.get(&t, "t0").is_none());
        // A single task larger than the budget is still kept, so its GetTask answers.
        store.insert(&t, task("big", 10_000));
        assert!(store.get(&t, "big").is_some());
    }
}
