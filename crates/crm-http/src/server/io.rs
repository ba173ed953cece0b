//! A connection's socket held to the edge's timers (decisions §22-24), as hyper reads and writes
//! it:
//! - waiting for a request: the first byte of a new connection within the head timeout, and the
//!   next request of a kept-alive one within the idle timeout;
//! - a request head, once its first byte is in, complete within the head timeout;
//! - a response: the client must take some of it at least once per write timeout.
//!
//! A read or write past its deadline fails with `TimedOut`, and hyper drops the connection
//! without an answer. While a request is being served (its body is read under the body's own
//! timers, `body.rs`) reads have no deadline here.
//!
//! hyper itself has a header-read timeout, but it runs from the end of the previous response,
//! so it would cut kept-alive connections at the head timeout instead of the idle one.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::{Instant, Sleep},
};

use super::own_answers::OwnAnswers;

/// What the connection's service tells its socket: a count that is odd while a request is
/// being served, and moves on by one when a request is taken in and when it is answered, so the
/// socket sees every answer even when it did not read while the request was served.
#[derive(Default)]
pub(crate) struct Serving(AtomicU64);

impl Serving {
    pub(crate) fn started(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn answered(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Timers {
    /// The most a request head may be: reads before a request is taken in stop there, so that
    /// hyper's own limit (its read buffer, of this size) holds to the byte.
    pub max_head: usize,
    pub head: Duration,
    pub idle: Duration,
    pub write: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No byte of the next request yet; `fresh` until the connection's first request.
    Waiting { fresh: bool },
    /// Some of a request head is in.
    Head,
    /// The service has the request (or is answering it).
    Serving,
}

pub(crate) struct EdgeIo<T> {
    inner: T,
    serving: Arc<Serving>,
    /// The count of `serving` when this socket last looked.
    seen: u64,
    /// Bytes read since the last answer (or the connection's start), while no request is served.
    unserved_bytes: usize,
    timers: Timers,
    phase: Phase,
    /// When the current phase's read must have happened by; `None` until a read had to wait.
    read_deadline: Option<Instant>,
    /// Armed at a deadline no later than `read_deadline`; moved later only when it fires.
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
    /// Whether a write is waiting for the client (the write timer runs).
    write_waiting: bool,
    answers: Arc<OwnAnswers>,
    /// A replaced answer of hyper's own still being written: its bytes and how many went out.
    replacing: Option<(Vec<u8>, usize)>,
}

impl<T> EdgeIo<T> {
    pub(crate) fn new(
        inner: T,
        serving: Arc<Serving>,
        timers: Timers,
        answers: Arc<OwnAnswers>,
        accepted_at: Instant,
    ) -> EdgeIo<T> {
        EdgeIo {
            inner,
            serving,
            seen: 0,
            unserved_bytes: 0,
            timers,
            phase: Phase::Waiting { fresh: true },
            read_deadline: Some(accepted_at + timers.head),
            read_timer: None,
            write_timer: None,
            write_waiting: false,
            answers,
            replacing: None,
        }
    }

    /// Follows the service: a request taken in, or its answer given.
    fn observe_service(&mut self) {
        let now = self.serving.get();
        if now == self.seen {
            return;
        }
        self.seen = now;
        self.phase = if !now.is_multiple_of(2) {
            Phase::Serving
        } else {
            Phase::Waiting { fresh: false }
        };
        self.read_deadline = None;
        self.unserved_bytes = 0;
    }

    /// Called when a read must wait: the deadline of the phase, and whether it has passed.
    fn wait_for_read(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let deadline = match (self.phase, self.read_deadline) {
            (Phase::Serving, _) => return Poll::Pending,
            (_, Some(deadline)) => deadline,
            (Phase::Waiting { fresh: false }, None) => {
                *self.read_deadline.insert(Instant::now() + self.timers.idle)
            }
            (_, None) => *self.read_deadline.insert(Instant::now() + self.timers.head),
        };
        let timer = match &mut self.read_timer {
            Some(timer) => {
                if timer.deadline() > deadline {
                    timer.as_mut().reset(deadline);
                }
                timer
            }
            None => self
                .read_timer
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        // A timer armed for an earlier phase fires early: it is moved on to this deadline.
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= deadline {
                return Poll::Ready(io::Error::new(
                    io::ErrorKind::TimedOut,
                    match self.phase {
                        Phase::Waiting { .. } => "no request within the idle or head timeout",
                        _ => "the request head was not complete within the head timeout",
                    },
                ));
            }
            timer.as_mut().reset(deadline);
        }
        Poll::Pending
    }

    /// Called as an answer is written: hyper does not read again until the socket wakes it, and
    /// the read it last tried was while the request was served, without a deadline; the idle
    /// timer must start now, and wake the connection when it runs out.
    fn start_idle_timer(&mut self, cx: &mut Context<'_>) {
        self.observe_service();
        if matches!(self.phase, Phase::Waiting { .. }) && self.wait_for_read(cx).is_ready() {
            cx.waker().wake_by_ref();
        }
    }

    /// Called after a write attempt: the write timer runs while writes wait for the client.
    fn after_write<R>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if result.is_ready() {
            self.write_waiting = false;
            return result;
        }
        let timer = match &mut self.write_timer {
            Some(timer) => timer,
            None => self
                .write_timer
                .insert(Box::pin(tokio::time::sleep(self.timers.write))),
        };
        if !self.write_waiting {
            self.write_waiting = true;
            timer.as_mut().reset(Instant::now() + self.timers.write);
        }
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took none of the response within the write timeout",
            )));
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> EdgeIo<T> {
    /// Writes what is left of a replaced answer.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((bytes, mut written)) = self.replacing.take() else {
            return Poll::Ready(Ok(()));
        };
        let result = loop {
            if written == bytes.len() {
                break Poll::Ready(Ok(()));
            }
            let attempt = Pin::new(&mut self.inner).poll_write(cx, &bytes[written..]);
            match self.after_write(cx, attempt) {
                Poll::Ready(Ok(0)) => break Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => written += n,
                Poll::Ready(Err(e)) => break Poll::Ready(Err(e)),
                Poll::Pending => break Poll::Pending,
            }
        };
        self.replacing = Some((bytes, written));
        result
    }

    /// `head` is the start of what hyper writes: when it is one of hyper's own answers, it is
    /// replaced by a problem document, and the whole of it counts as written.
    fn poll_replace(
        &mut self,
        cx: &mut Context<'_>,
        head: &[u8],
        len: usize,
    ) -> Option<Poll<io::Result<usize>>> {
        if self.replacing.is_none() {
            self.replacing = Some((self.answers.replacement_for(head)?, 0));
        }
        Some(self.poll_replacement(cx).map_ok(|()| len))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for EdgeIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.observe_service();
        let before = buf.filled().len();
        let result = if this.phase == Phase::Serving {
            Pin::new(&mut this.inner).poll_read(cx, buf)
        } else {
            this.read_head_bytes(cx, buf)
        };
        match result {
            Poll::Ready(Ok(())) => {
                let read = buf.filled().len() - before;
                if read > 0 && matches!(this.phase, Phase::Waiting { .. }) {
                    this.phase = Phase::Head;
                    this.read_deadline = None;
                }
                if this.phase != Phase::Serving {
                    this.unserved_bytes += read;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.wait_for_read(cx).map(Err),
        }
    }
}

impl<T: AsyncRead + Unpin> EdgeIo<T> {
    /// A read while no request is served: no further than the most a head may be.
    fn read_head_bytes(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let allowed = self.timers.max_head.saturating_sub(self.unserved_bytes);
        if buf.remaining() <= allowed {
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        // Rare (hyper's buffer is about the limit's size): through a buffer of the allowed size.
        let mut limited = vec![0u8; allowed];
        let mut part = ReadBuf::new(&mut limited);
        std::task::ready!(Pin::new(&mut self.inner).poll_read(cx, &mut part))?;
        buf.put_slice(part.filled());
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for EdgeIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.start_idle_timer(cx);
        if let Some(done) = this.poll_replace(cx, buf, buf.len()) {
            return done;
        }
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.after_write(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.start_idle_timer(cx);
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        let len = bufs.iter().map(|b| b.len()).sum();
        if let Some(done) = this.poll_replace(cx, first, len) {
            return done;
        }
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.after_write(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_replacement(cx))?;
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.after_write(cx, result)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_replacement(cx))?;
        let result = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.after_write(cx, result)
    }
}
