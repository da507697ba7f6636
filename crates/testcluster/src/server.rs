//! The API server's HTTP front: an accept loop that can be stopped and started again on the same
//! address while the store, the scheduler and the node agents carry on, as a real apiserver
//! restarts behind etcd. A stop drops every open connection at once (watches, log follows,
//! requests in flight: the clients see a reset, not a graceful drain), so what a client must
//! survive is a crash-and-restart, and kube-rs clients reconnect to the same URL.
//!
//! axum's own `serve` cannot do this: its graceful shutdown waits for open streams (a watch lasts
//! minutes), and it cannot drop the connections it spawned. The loop here is axum's, minus that.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;

use crate::cluster::lock;
use crate::error::{Error, Result};

/// How long a stop waits for the accept loop to let go of the port.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// One incarnation of the server: its stop token and a signal that its listener is closed.
struct Incarnation {
    stop: CancellationToken,
    closed: std::sync::mpsc::Receiver<()>,
}

/// The front of the API server: which router, which address, and the incarnation serving now.
pub struct ApiFront {
    app: Router,
    addr: SocketAddr,
    runtime: tokio::runtime::Handle,
    /// Cancelled at cluster shutdown: every incarnation stops with it.
    shutdown: CancellationToken,
    current: Mutex<Option<Incarnation>>,
}

impl ApiFront {
    /// Serves `app` on `listener` (on the current runtime) until `shutdown` or [`Self::stop`].
    pub fn start(app: Router, listener: TcpListener, shutdown: CancellationToken) -> Result<ApiFront> {
        let front = ApiFront {
            app,
            addr: listener.local_addr()?,
            runtime: tokio::runtime::Handle::current(),
            shutdown,
            current: Mutex::new(None),
        };
        *lock(&front.current) = Some(front.spawn(listener));
        Ok(front)
    }

    fn spawn(&self, listener: TcpListener) -> Incarnation {
        let stop = self.shutdown.child_token();
        let (closed_tx, closed) = std::sync::mpsc::channel();
        self.runtime
            .spawn(accept_loop(listener, self.app.clone(), stop.clone(), closed_tx));
        Incarnation { stop, closed }
    }

    /// Stops serving: the port is closed (new connections are refused) and every open
    /// connection is dropped. Blocking; returns once the listener is gone.
    pub fn stop(&self) -> Result<()> {
        let Some(inc) = lock(&self.current).take() else {
            return Err(Error::Config("the API server is already stopped".into()));
        };
        inc.stop.cancel();
        inc.closed
            .recv_timeout(STOP_WAIT)
            .map_err(|_| Error::Other("the API server's listener did not close within 5 s".into()))
    }

    /// Serves again on the same address (blocking until bound).
    pub fn resume(&self) -> Result<()> {
        let mut current = lock(&self.current);
        if current.is_some() {
            return Err(Error::Config("the API server is already serving".into()));
        }
        let addr = self.addr;
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(rebind(addr));
        });
        let listener = rx
            .recv_timeout(STOP_WAIT)
            .map_err(|_| Error::Other("binding the API server again took over 5 s".into()))??;
        *current = Some(self.spawn(listener));
        Ok(())
    }
}

/// Binds `addr` again. SO_REUSEADDR: the connections the stop closed sit in TIME_WAIT on it.
fn rebind(addr: SocketAddr) -> Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket.listen(1024)?)
}

async fn accept_loop(listener: TcpListener, app: Router, stop: CancellationToken, closed: std::sync::mpsc::Sender<()>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors and the like: pause rather than spin, as axum does.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let stop = stop.clone();
        tokio::spawn(async move {
            let builder = Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            // Dropping the connection future closes the socket: a crash, not a drain.
            tokio::select! {
                _ = conn => {}
                _ = stop.cancelled() => {}
            }
        });
    }
    drop(listener);
    let _ = closed.send(());
}

impl crate::TestCluster {
    /// Stops the API server as a crash would: the port refuses connections and every open
    /// connection (watches, log follows, requests in flight) is dropped. The store, scheduler
    /// and node agents carry on: pods keep running and changing state meanwhile.
    pub fn stop_api_server(&self) -> Result<()> {
        self.front()?.stop()
    }

    /// Serves again on the same address with the same store (resource versions go on, so a
    /// watch resumed from its last version sees what happened while the server was down).
    pub fn start_api_server(&self) -> Result<()> {
        self.front()?.resume()
    }

    /// [`Self::stop_api_server`], `downtime`, then [`Self::start_api_server`] (blocking).
    pub fn restart_api_server(&self, downtime: Duration) -> Result<()> {
        self.stop_api_server()?;
        std::thread::sleep(downtime);
        self.start_api_server()
    }

    fn front(&self) -> Result<std::sync::Arc<ApiFront>> {
        lock(&self.shared.api)
            .clone()
            .ok_or_else(|| Error::Other("the cluster has shut down".into()))
    }
}
