//! The one thread per process that owns UCX.
//!
//! The wrapper's context, worker and endpoints are `!Send` (UCP workers run in single-thread
//! mode), so they are created on this thread and never leave it. The async control code sends it
//! closures and awaits their results; a long measurement therefore never blocks the tokio
//! runtime, and the control task stays free to notice a peer that hung up.

use crate::error::EngineError;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;
use tokio::sync::oneshot;

type Job<S> = Box<dyn FnOnce(&mut S) + Send>;

/// Handle to the UCX thread, whose state `S` lives on that thread only.
pub struct UcxThread<S> {
    jobs: Option<std_mpsc::Sender<Job<S>>>,
    exited: Option<std_mpsc::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<S: 'static> UcxThread<S> {
    /// Starts the thread and builds its state there with `init`; returns once `init` finished.
    pub fn spawn<I, E>(init: I) -> Result<(Self, E), EngineError>
    where
        I: FnOnce() -> Result<(S, E), EngineError> + Send + 'static,
        E: Send + 'static,
    {
        let (job_tx, job_rx) = std_mpsc::channel::<Job<S>>();
        let (init_tx, init_rx) = std_mpsc::channel::<Result<E, EngineError>>();
        let (exit_tx, exit_rx) = std_mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("icb-ucx".into())
            .spawn(move || {
                let mut state = match init() {
                    Ok((state, extra)) => {
                        let _ = init_tx.send(Ok(extra));
                        state
                    }
                    Err(e) => {
                        let _ = init_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = job_rx.recv() {
                    job(&mut state);
                }
                drop(state);
                let _ = exit_tx.send(());
            })
            .map_err(|e| EngineError::Internal(format!("cannot start the UCX thread: {e}")))?;
        let extra = match init_rx.recv() {
            Ok(r) => r?,
            Err(_) => return Err(EngineError::Internal("the UCX thread died while starting".into())),
        };
        Ok((
            UcxThread {
                jobs: Some(job_tx),
                exited: Some(exit_rx),
                thread: Some(thread),
            },
            extra,
        ))
    }

    /// Runs `f` on the UCX thread and returns its result.
    pub async fn call<R, F>(&self, f: F) -> Result<R, EngineError>
    where
        R: Send + 'static,
        F: FnOnce(&mut S) -> R + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job<S> = Box::new(move |state| {
            let _ = tx.send(f(state));
        });
        let jobs = self
            .jobs
            .as_ref()
            .ok_or_else(|| EngineError::Internal("the UCX thread was shut down".into()))?;
        jobs.send(job)
            .map_err(|_| EngineError::Internal("the UCX thread is gone".into()))?;
        rx.await
            .map_err(|_| EngineError::Internal("the UCX thread dropped a job (it panicked?)".into()))
    }

    /// Stops the thread (its state is dropped there: endpoints closed, worker and context
    /// destroyed) and waits at most `limit` for it.
    pub fn shutdown(&mut self, limit: Duration) {
        self.jobs.take();
        if let Some(exited) = self.exited.take()
            && exited.recv_timeout(limit).is_ok()
            && let Some(t) = self.thread.take()
        {
            let _ = t.join();
        }
        // Past the limit the thread is left to the process exit rather than hanging here.
    }
}

impl<S> Drop for UcxThread<S> {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(exited) = self.exited.take()
            && exited.recv_timeout(Duration::from_secs(10)).is_ok()
            && let Some(t) = self.thread.take()
        {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[tokio::test]
    async fn runs_jobs_on_a_thread_owning_non_send_state() {
        let (mut t, extra) = UcxThread::spawn(|| Ok((Rc::new(41u32), "ready"))).unwrap();
        assert_eq!(extra, "ready");
        let v = t.call(|s: &mut Rc<u32>| **s + 1).await.unwrap();
        assert_eq!(v, 42);
        let name = t
            .call(|_| std::thread::current().name().map(str::to_string))
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("icb-ucx"));
        t.shutdown(Duration::from_secs(5));
        assert!(t.call(|_| ()).await.is_err());
    }

    #[test]
    fn init_errors_come_back() {
        let r = UcxThread::<()>::spawn(|| Err::<((), ()), _>(EngineError::UcxSetup("no UCX".into())));
        assert!(matches!(r, Err(EngineError::UcxSetup(_))));
    }
}
