//! A request body held to the edge's two body timers (decisions §24): no more than `stall`
//! without a byte, and no more than twice that for the whole body while it is at most
//! [`crate::MAX_BODY_BYTES`] (an import's file, up to 256 MiB, is held to the stall timer alone
//! once past it). Reading it past either yields
//! [`BodyTimeout`], which the REST transport answers with 408 `request_timeout`.
//!
//! The timer exists only once a read has had to wait: a body that arrives with its head (nearly
//! every request) is read without a clock reading or a timer registration.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

pub use crm_api::body::BodyTimeout;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

pin_project_lite::pin_project! {
    pub(crate) struct DeadlineBody<B> {
        #[pin]
        inner: B,
        stall: Duration,
        // Set at the first wait: the whole body must be read by then + 2 × `stall`.
        first_wait: Option<Instant>,
        timer: Option<Pin<Box<Sleep>>>,
        timed_out: bool,
        // Bytes read so far: past `MAX_BODY_BYTES` the whole-body bound no longer applies.
        read: usize,
    }
}

impl<B> DeadlineBody<B> {
    pub(crate) fn new(inner: B, stall: Duration) -> DeadlineBody<B> {
        DeadlineBody {
            inner,
            stall,
            first_wait: None,
            timer: None,
            timed_out: false,
            read: 0,
        }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        if *this.timed_out {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout))));
        }
        match this.inner.poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref)) {
                    *this.read += data.map_or(0, |d| d.len());
                }
                if let Some(timer) = this.timer.as_mut() {
                    // Progress: the stall timer starts again, within the whole body's bound
                    // while the body is small enough to have one.
                    let whole = this
                        .first_wait
                        .filter(|_| *this.read <= crate::MAX_BODY_BYTES)
                        .map(|t| t + *this.stall * 2);
                    let next = Instant::now() + *this.stall;
                    timer
                        .as_mut()
                        .reset(whole.map_or(next, |whole| next.min(whole)));
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                if this.timer.is_none() {
                    let now = Instant::now();
                    *this.first_wait = Some(now);
                    *this.timer = Some(Box::pin(tokio::time::sleep_until(now + *this.stall)));
                }
                let timer = this.timer.as_mut().expect("set above");
                if timer.as_mut().poll(cx).is_ready() {
                    *this.timed_out = true;
                    return Poll::Ready(Some(Err(Box::new(BodyTimeout))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;

    /// A body whose frames the test sends; it ends when the sender is dropped.
    struct Channel(mpsc::Receiver<Bytes>);

    impl Body for Channel {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
        }
    }

    fn body(stall_secs: u64) -> (mpsc::Sender<Bytes>, Pin<Box<DeadlineBody<Channel>>>) {
        let (tx, rx) = mpsc::channel(8);
        let body = DeadlineBody::new(Channel(rx), Duration::from_secs(stall_secs));
        (tx, Box::pin(body))
    }

    async fn read(body: &mut Pin<Box<DeadlineBody<Channel>>>) -> Option<Result<Bytes, String>> {
        std::future::poll_fn(|cx| body.as_mut().poll_frame(cx))
            .await
            .map(|r| r.map(|f| f.into_data().unwrap()).map_err(|e| e.to_string()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_arrives_at_once_is_read_without_a_timer() {
        let (tx, mut body) = body(30);
        tx.send(Bytes::from_static(b"{}")).await.unwrap();
        drop(tx);
        assert_eq!(read(&mut body).await, Some(Ok(Bytes::from_static(b"{}"))));
        assert_eq!(read(&mut body).await, None);
        assert!(body.timer.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stalls_past_the_timeout_fails_and_stays_failed() {
        let (tx, mut body) = body(30);
        tx.send(Bytes::from_static(b"{")).await.unwrap();
        assert!(read(&mut body).await.unwrap().is_ok());
        let started = Instant::now();
        assert_eq!(read(&mut body).await, Some(Err(BodyTimeout.to_string())));
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(read(&mut body).await, Some(Err(BodyTimeout.to_string())));
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_trickles_is_cut_at_twice_the_stall_timeout() {
        let (tx, mut body) = body(30);
        let started = Instant::now();
        tokio::spawn(async move {
            // A byte every 20 s: never a 30-second stall, but never done either.
            while tx.send(Bytes::from_static(b" ")).await.is_ok() {
                tokio::time::sleep(Duration::from_secs(20)).await;
            }
        });
        loop {
            match read(&mut body).await {
                Some(Ok(_)) => continue,
                other => {
                    assert_eq!(other, Some(Err(BodyTimeout.to_string())));
                    break;
                }
            }
        }
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(60) && took <= Duration::from_secs(61),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_past_the_json_limit_is_held_to_the_stall_timer_only() {
        let (tx, mut body) = body(30);
        let sender = tokio::spawn(async move {
            // Past 1 MiB at once, then a piece every 20 s for 100 s, then silence.
            tx.send(Bytes::from(vec![b'a'; crate::MAX_BODY_BYTES + 1]))
                .await
                .unwrap();
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                tx.send(Bytes::from_static(b"a")).await.unwrap();
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(tx);
        });
        let started = Instant::now();
        let mut pieces = 0;
        loop {
            match read(&mut body).await {
                Some(Ok(_)) => pieces += 1,
                other => {
                    assert_eq!(other, Some(Err(BodyTimeout.to_string())));
                    break;
                }
            }
        }
        assert_eq!(pieces, 6);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(130) && took <= Duration::from_secs(131),
            "{took:?}"
        );
        sender.abort();
    }
}
