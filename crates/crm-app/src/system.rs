//! The real clock and id source.

use std::time::{SystemTime, UNIX_EPOCH};

use crm_domain::Timestamp;
use uuid::Uuid;

use crate::ports::{Clock, IdSource};

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        Timestamp::from_millis(ms)
    }
}

pub struct UuidV7;

impl IdSource for UuidV7 {
    fn new_uuid(&self) -> Uuid {
        Uuid::now_v7()
    }
}
