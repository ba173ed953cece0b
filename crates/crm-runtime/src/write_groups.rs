//! Write grouping ([`crm_app::ports::WriteGrouping`]) with a fixed number of transaction slots and
//! a queue. With `slots` transactions:
//! - a write that finds a slot free takes it and runs alone, exactly as without grouping (no
//!   queue, no other task: at low load nothing changes);
//! - a write that finds every slot taken is queued;
//! - whoever gives a slot back (a write alone, once it has its answer, or a group) first looks
//!   at the queue: if writes wait there, it keeps the slot and runs up to `max_group` of them as
//!   one group ([`GroupedWrites::together`]), in a task of its own.
//!
//! So groups form only while the database already has `slots` write transactions in flight, and
//! they grow with the load. Both decisions (take a slot or queue; give it back or serve the
//! queue) are made under one lock, so a queued write is never left without a slot to serve it.
//! What the writes are is not known here.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard},
};

use async_trait::async_trait;
use crm_app::ports::{GroupedWrites, WriteGrouping};
use tokio::sync::oneshot;

/// The slots and the queue; shared by every clone of the application that uses them.
pub struct WriteSlots<J, R> {
    inner: Arc<Inner<J, R>>,
}

struct Inner<J, R> {
    slots: usize,
    max_group: usize,
    state: Mutex<State<J, R>>,
}

struct State<J, R> {
    /// Slots taken: writes running alone plus groups running.
    taken: usize,
    queue: VecDeque<Queued<J, R>>,
}

/// A write waiting for a group, with where its answer goes.
struct Queued<J, R> {
    job: J,
    reply: oneshot::Sender<R>,
}

impl<J: Send + 'static, R: Send + 'static> WriteSlots<J, R> {
    /// Once `slots` writes are in flight, further writes queue and run up to `max_group` in one
    /// transaction (each at least 1). Needs a tokio runtime, on which the groups run.
    pub fn new(slots: usize, max_group: usize) -> WriteSlots<J, R> {
        WriteSlots {
            inner: Arc::new(Inner {
                slots: slots.max(1),
                max_group: max_group.max(1),
                state: Mutex::new(State {
                    taken: 0,
                    queue: VecDeque::new(),
                }),
            }),
        }
    }
}

impl<J: Send + 'static, R: Send + 'static> Inner<J, R> {
    fn state(&self) -> MutexGuard<'_, State<J, R>> {
        // The lock is never held across a panic point that could leave `State` half-changed.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Up to `max_group` queued writes, or none.
    fn take_queued(&self) -> Option<Vec<Queued<J, R>>> {
        let mut state = self.state();
        take(&mut state, self.max_group)
    }

    /// Gives a slot back, unless writes are queued: then the slot serves them, in a task of its
    /// own (the slot's holder may be a request about to answer).
    fn give_back(self: &Arc<Self>, writes: &dyn GroupedWrites<J, R>) {
        let mut state = self.state();
        let Some(group) = take(&mut state, self.max_group) else {
            state.taken -= 1;
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime left to serve the group on: the process is ending, and the group's
            // writes answer `lost` as their senders drop.
            state.taken -= 1;
            return;
        };
        drop(state);
        let slot = Slot {
            inner: self.clone(),
            writes: writes.handle(),
        };
        drop(runtime.spawn(slot.serve(group)));
    }
}

fn take<J, R>(state: &mut State<J, R>, max_group: usize) -> Option<Vec<Queued<J, R>>> {
    if state.queue.is_empty() {
        return None;
    }
    let n = state.queue.len().min(max_group);
    Some(state.queue.drain(..n).collect())
}

/// A slot a group task holds; given back when dropped, also when the task panics.
struct Slot<J: Send + 'static, R: Send + 'static> {
    inner: Arc<Inner<J, R>>,
    writes: Arc<dyn GroupedWrites<J, R>>,
}

impl<J: Send + 'static, R: Send + 'static> Drop for Slot<J, R> {
    fn drop(&mut self) {
        self.inner.give_back(&*self.writes);
    }
}

impl<J: Send + 'static, R: Send + 'static> Slot<J, R> {
    /// Runs `group`, then each group queued meanwhile, until the queue is empty.
    async fn serve(self, mut group: Vec<Queued<J, R>>) {
        loop {
            run_group(&*self.writes, group).await;
            match self.inner.take_queued() {
                Some(next) => group = next,
                None => return,
            }
        }
    }
}

/// Runs the writes of `group` whose callers still wait, together, and answers each.
async fn run_group<J: Send + 'static, R: Send + 'static>(
    writes: &dyn GroupedWrites<J, R>,
    group: Vec<Queued<J, R>>,
) {
    // A write whose request went away while it waited (alone, it would have been rolled back
    // with it) is not run.
    let (jobs, replies): (Vec<J>, Vec<oneshot::Sender<R>>) = group
        .into_iter()
        .filter(|q| !q.reply.is_closed())
        .map(|q| (q.job, q.reply))
        .unzip();
    if jobs.is_empty() {
        return;
    }
    let answers = writes.together(jobs).await;
    for (reply, answer) in replies.into_iter().zip(answers) {
        let _ = reply.send(answer);
    }
}

/// The slot a write running alone holds; given back when dropped, also when the request's
/// future is dropped (a client that went away).
struct AloneSlot<'a, J: Send + 'static, R: Send + 'static> {
    inner: &'a Arc<Inner<J, R>>,
    writes: &'a dyn GroupedWrites<J, R>,
}

impl<J: Send + 'static, R: Send + 'static> Drop for AloneSlot<'_, J, R> {
    fn drop(&mut self) {
        self.inner.give_back(self.writes);
    }
}

#[async_trait]
impl<J: Send + 'static, R: Send + 'static> WriteGrouping<J, R> for WriteSlots<J, R> {
    async fn run(&self, writes: &dyn GroupedWrites<J, R>, job: J) -> R {
        let queued = {
            let mut state = self.inner.state();
            if state.taken < self.inner.slots {
                state.taken += 1;
                Err(job)
            } else {
                let (reply, answer) = oneshot::channel();
                state.queue.push_back(Queued { job, reply });
                Ok(answer)
            }
        };
        match queued {
            Ok(answer) => answer.await.unwrap_or_else(|_| writes.lost()),
            Err(job) => {
                let _slot = AloneSlot {
                    inner: &self.inner,
                    writes,
                };
                writes.alone(job).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use tokio::sync::Semaphore;

    use super::*;

    /// Writes that record how they ran; `alone` waits for a permit, so a test can hold the only
    /// slot while others queue.
    #[derive(Clone)]
    struct Recorder {
        gate: Arc<Semaphore>,
        groups: Arc<StdMutex<Vec<Vec<u32>>>>,
    }

    #[async_trait]
    impl GroupedWrites<u32, String> for Recorder {
        async fn alone(&self, job: u32) -> String {
            let _permit = self.gate.acquire().await.unwrap();
            format!("alone {job}")
        }
        async fn together(&self, jobs: Vec<u32>) -> Vec<String> {
            self.groups.lock().unwrap().push(jobs.clone());
            jobs.into_iter().map(|j| format!("grouped {j}")).collect()
        }
        fn lost(&self) -> String {
            "lost".into()
        }
        fn handle(&self) -> Arc<dyn GroupedWrites<u32, String>> {
            Arc::new(self.clone())
        }
    }

    #[tokio::test]
    async fn writes_that_find_every_slot_taken_run_together_and_each_gets_its_own_answer() {
        let slots = Arc::new(WriteSlots::<u32, String>::new(1, 10));
        let writes = Recorder {
            gate: Arc::new(Semaphore::new(0)),
            groups: Arc::default(),
        };
        let first = tokio::spawn({
            let (slots, writes) = (slots.clone(), writes.clone());
            async move { slots.run(&writes, 0).await }
        });
        // Let the first write take the only slot before the others arrive.
        while slots.inner.state().taken == 0 {
            tokio::task::yield_now().await;
        }
        let queued: Vec<_> = (1..=3)
            .map(|job| {
                let (slots, writes) = (slots.clone(), writes.clone());
                tokio::spawn(async move { slots.run(&writes, job).await })
            })
            .collect();
        while slots.inner.state().queue.len() < 3 {
            tokio::task::yield_now().await;
        }
        writes.gate.add_permits(1);
        assert_eq!(first.await.unwrap(), "alone 0");
        for (job, answer) in (1..=3).zip(queued) {
            assert_eq!(answer.await.unwrap(), format!("grouped {job}"));
        }
        assert_eq!(*writes.groups.lock().unwrap(), vec![vec![1, 2, 3]]);
        assert_eq!(slots.inner.state().taken, 0, "every slot given back");
    }

    #[tokio::test]
    async fn a_write_with_a_free_slot_runs_alone_at_once() {
        let slots = WriteSlots::<u32, String>::new(2, 10);
        let writes = Recorder {
            gate: Arc::new(Semaphore::new(1)),
            groups: Arc::default(),
        };
        assert_eq!(slots.run(&writes, 7).await, "alone 7");
        assert!(writes.groups.lock().unwrap().is_empty());
        assert_eq!(slots.inner.state().taken, 0);
    }
}
