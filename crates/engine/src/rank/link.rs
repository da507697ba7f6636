//! A KV rank's connection to its coordinator (`icb_kv_transfer::ranks`), shared by both engines'
//! ranks: one JSON line per message each way, a reader thread turning the coordinator's lines
//! into messages so that a rank can keep progressing its own engine while it waits.
//!
//! A coordinator in a bench pod admits only ranks that hold the run's token: when the plan says
//! [`RankPlan::authenticate`] the link waits for its [`RankDown::Challenge`] first and keeps the
//! answer ([`Link::proof`]) for the rank's hello, whichever engine the rank runs.

use super::{LinkError, RankError};
use icb_core::protocol::TOKEN_ENV;
use icb_core::protocol::kv_rank::{self, RankDown, RankPlan, RankUp, to_line, unhex};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError, channel};
use std::time::{Duration, Instant};

/// How long a rank tries to reach its coordinator.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The coordinator's connection: writes here, reads through the reader thread.
pub struct Link {
    stream: TcpStream,
    rx: Receiver<Result<RankDown, LinkError>>,
    /// How long any one message of the coordinator may take (the plan's deadline).
    pub timeout: Duration,
    /// The answer to the coordinator's challenge ([`kv_rank::proof`], hex), for the hello.
    pub proof: Option<String>,
}

impl Link {
    /// Connects to the plan's coordinator and, when the plan says so, answers its challenge with
    /// the run's token from the environment (where the exec wrapper put it; never on a command
    /// line).
    pub fn connect(plan: &RankPlan) -> Result<Link, LinkError> {
        let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
        Link::connect_with(plan, token.as_deref())
    }

    /// [`Link::connect`] with the run's token given.
    pub fn connect_with(plan: &RankPlan, token: Option<&str>) -> Result<Link, LinkError> {
        let addr: std::net::SocketAddr = plan.coordinator.parse().map_err(|source| LinkError::BadAddress {
            address: plan.coordinator.clone(),
            source,
        })?;
        let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
            .map_err(|source| LinkError::Unreachable { address: addr, source })?;
        let _ = stream.set_nodelay(true);
        let reader = stream.try_clone().map_err(LinkError::Connection)?;
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let msg = match line {
                    Ok(l) => serde_json::from_str::<RankDown>(&l).map_err(LinkError::BadLine),
                    Err(e) => Err(LinkError::Read(e)),
                };
                let stop = msg.is_err();
                if tx.send(msg).is_err() || stop {
                    return;
                }
            }
            let _ = tx.send(Err(LinkError::Closed));
        });
        let mut link = Link {
            stream,
            rx,
            timeout: Duration::from_secs_f64(plan.message_timeout_s.max(1.0)),
            proof: None,
        };
        if plan.authenticate {
            let token = token.ok_or(LinkError::NoToken)?;
            link.proof = Some(link.answer_challenge(plan, token)?);
        }
        Ok(link)
    }

    /// The coordinator's challenge, answered with a proof of the run's token.
    fn answer_challenge(&mut self, plan: &RankPlan, token: &str) -> Result<String, LinkError> {
        match self.recv("before its challenge")? {
            RankDown::Challenge { nonce } => {
                let nonce = unhex(&nonce).map_err(|reason| LinkError::BadField {
                    what: "the coordinator's challenge".into(),
                    reason,
                })?;
                Ok(kv_rank::proof(token, &nonce, plan.id))
            }
            got => Err(LinkError::Unexpected {
                got,
                instead: "instead of its challenge",
            }),
        }
    }

    pub fn send(&mut self, msg: &RankUp) {
        // A lost coordinator shows up on the next read; nothing to do here.
        let _ = self.stream.write_all(to_line(msg).as_bytes());
    }

    /// The next message within the deadline (initiators and idle ranks).
    pub fn recv(&mut self, during: &str) -> Result<RankDown, LinkError> {
        match self.rx.recv_timeout(self.timeout) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => Err(self.late(during)),
            Err(RecvTimeoutError::Disconnected) => Err(LinkError::ReaderEnded),
        }
    }

    /// The next message, calling `progress` while none is there: a target serves one-sided
    /// operations that software transports (tcp, RMA emulation) carry through its progress.
    pub fn recv_progressing(
        &mut self,
        during: &str,
        mut progress: impl FnMut() -> Result<(), RankError>,
    ) -> Result<RankDown, RankError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.rx.try_recv() {
                Ok(m) => return Ok(m?),
                Err(TryRecvError::Disconnected) => return Err(LinkError::ReaderEnded.into()),
                Err(TryRecvError::Empty) => {}
            }
            progress()?;
            if Instant::now() > deadline {
                return Err(self.late(during).into());
            }
            // Many ranks share few cores on one host: let the initiators run.
            std::thread::yield_now();
        }
    }

    fn late(&self, during: &str) -> LinkError {
        LinkError::Silent {
            waited: self.timeout,
            during: during.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::protocol::kv_rank::{RankId, RankSide, hex, verify_proof};
    use icb_core::{EngineKind, MemoryType};
    use std::net::TcpListener;

    const TOKEN: &str = "the-runs-token";

    fn plan(coordinator: String, authenticate: bool) -> RankPlan {
        RankPlan {
            id: RankId {
                side: RankSide::Decode,
                rank: 1,
            },
            engine: EngineKind::Ucx,
            read: true,
            initiator: true,
            memory: MemoryType::Host,
            peer_memory: MemoryType::Host,
            buffer_bytes: 4096,
            seed: 1,
            peers: Vec::new(),
            coordinator,
            message_timeout_s: 5.0,
            authenticate,
            cpus: None,
            ucx_config: Vec::new(),
            cuda_alloc: Default::default(),
        }
    }

    /// A coordinator that sends `first` on the one connection it accepts, then `Go 7`, and
    /// keeps the connection open until the test ends.
    fn coordinator(first: Option<RankDown>) -> (String, std::thread::JoinHandle<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let serve = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            for m in first.iter().chain([&RankDown::Go { rep: 7, first: None }]) {
                s.write_all(to_line(m).as_bytes()).unwrap();
            }
            s
        });
        (addr, serve)
    }

    #[test]
    fn an_authenticating_rank_answers_the_challenge_with_a_proof_of_the_token() {
        let nonce = [9u8; 32];
        let (addr, serve) = coordinator(Some(RankDown::Challenge { nonce: hex(&nonce) }));
        let p = plan(addr, true);
        let mut link = Link::connect_with(&p, Some(TOKEN)).unwrap();
        let proof = link.proof.clone().expect("a proof for the hello");
        assert!(verify_proof(TOKEN, &nonce, p.id, &proof));
        assert!(!verify_proof("another-token", &nonce, p.id, &proof));
        // The challenge is consumed: the next message is the coordinator's next one.
        assert_eq!(link.recv("in the test").unwrap(), RankDown::Go { rep: 7, first: None });
        drop(serve.join().unwrap());
    }

    #[test]
    fn an_authenticating_rank_without_a_token_or_a_challenge_fails() {
        let (addr, serve) = coordinator(Some(RankDown::Challenge { nonce: hex(&[1u8; 32]) }));
        let no_token = Link::connect_with(&plan(addr, true), None);
        assert!(matches!(no_token, Err(LinkError::NoToken)), "{:?}", no_token.err());
        drop(serve.join().unwrap());
        // A coordinator that does not challenge first is refused, not answered.
        let (addr, serve) = coordinator(None);
        let unchallenged = Link::connect_with(&plan(addr, true), Some(TOKEN));
        assert!(
            matches!(unchallenged, Err(LinkError::Unexpected { .. })),
            "{:?}",
            unchallenged.err()
        );
        drop(serve.join().unwrap());
    }

    #[test]
    fn a_rank_not_asked_to_authenticate_reads_no_challenge_and_sends_no_proof() {
        let (addr, serve) = coordinator(None);
        let mut link = Link::connect_with(&plan(addr, false), Some(TOKEN)).unwrap();
        assert_eq!(link.proof, None);
        assert_eq!(link.recv("in the test").unwrap(), RankDown::Go { rep: 7, first: None });
        drop(serve.join().unwrap());
    }
}
