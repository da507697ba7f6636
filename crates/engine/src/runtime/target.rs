//! The target (server) side of a case: its buffer, its part of each phase, and the check of
//! what arrived.

use super::*;

impl Runtime {
    pub fn target_setup(&mut self, setup: CaseSetup) -> Result<CaseReady, RunError> {
        self.drain_now();
        self.case = None;
        let layout = Self::layout(&setup, false)?;
        self.hold_cuda_context(setup.memory);
        let mut buf = Buf::alloc(
            setup.memory.target,
            Self::span(&setup, layout, false)?,
            self.cuda_device,
            setup.cuda_alloc,
        )?;
        if !setup.untouched {
            // The target holds the data's source for get, its destination otherwise.
            let seed = if setup.test == TestKind::GetBw {
                setup.seed
            } else {
                other_seed(setup.seed)
            };
            buf.fill(seed)?;
        }
        let mut ready = CaseReady {
            cuda_alloc: buf.cuda_allocation(),
            ..CaseReady::default()
        };
        let reg = if setup.test.is_rma() {
            let reg = buf.map(&self._ctx)?;
            let map = reg
                .map()
                .ok_or(RunError::Internal("a required registration is missing"))?;
            ready.remote_addr = map.address();
            ready.rkey = HexBytes(map.pack_rkey()?);
            Rc::new(reg)
        } else {
            Rc::new(buf.register(&self._ctx))
        };
        self.case = Some(Case {
            setup,
            layout,
            buf,
            pong: None,
            reg: Some(reg),
            pong_reg: None,
            rkey: None,
            remote_addr: 0,
        });
        Ok(ready)
    }

    /// The target's part of a phase with `window` outstanding operations; `ready` fires once
    /// receives are posted.
    pub fn target_phase(
        &mut self,
        kind: PhaseKind,
        iterations: u64,
        window: u32,
        ready: tokio::sync::oneshot::Sender<()>,
        ctl: &PhaseCtl,
    ) -> Result<(), RunError> {
        let r = self.target_phase_inner(kind, iterations, window, ready, ctl);
        if r.is_err() {
            self.drain_now();
        }
        r
    }

    fn target_phase_inner(
        &mut self,
        _kind: PhaseKind,
        n: u64,
        window: u32,
        ready: tokio::sync::oneshot::Sender<()>,
        ctl: &PhaseCtl,
    ) -> Result<(), RunError> {
        let case = self.case.as_ref().ok_or(RunError::NoCase)?;
        let ep = self.ep.as_ref().ok_or(RunError::NoEndpoint)?;
        let w = &self.worker;
        let size = case.layout.block;
        match case.setup.test {
            TestKind::TagBw => {
                let mut ready = Some(ready);
                let data = w.prepare_tag_recv(case.registered()?, 0..size, TAG_DATA, TAG_MASK, OpOptions::STREAM)?;
                // ucx_perftest's receive loop (ucx::Worker::stream): no per-message slot.
                let got = w.stream(
                    &data,
                    n,
                    window.max(1) as usize,
                    ctl.deadline(),
                    || ctl.check(),
                    // Receives for the whole first window are posted: the sender may start.
                    || {
                        if let Some(r) = ready.take() {
                            let _ = r.send(());
                        }
                    },
                )?;
                check_stream("message", got, n, size)?;
                send_ack(w, ep, &self.ack, ctl)
            }
            TestKind::TagLat => {
                let b = case.registered()?;
                let ended_early = 'ping_pong: {
                    // Prepared once and posted through lanes (no slot per message): the echo is
                    // all that runs between a ping and its pong.
                    let ping = w.prepare_tag_recv(b, 0..size, TAG_PING, TAG_MASK, OpOptions::default())?;
                    let pong = w.prepare_tag_send(ep, b, 0..size, TAG_PONG, OpOptions::default())?;
                    let (recv, send) = (w.lane(&ping)?, w.lane(&pong)?);
                    let deadline = ctl.deadline();
                    recv.post()?;
                    let _ = ready.send(());
                    for i in 0..n {
                        // The initiator may end the phase early (its soft deadline): it then
                        // says so on the control channel instead of sending the next ping. The
                        // receive still posted is cancelled when its lane is dropped.
                        if !poll_until_or_stop(w, ctl, || recv.is_done())? {
                            break 'ping_pong Ok::<bool, RunError>(true);
                        }
                        // The echo leaves first; finishing the receive and posting the next one
                        // happen while the pong is in flight (ucx_perftest's order).
                        send.post()?;
                        check_length("ping", recv.finish(deadline, || ctl.check())?, size)?;
                        // The next ping lands in the buffer the echo is sent from: wait for it.
                        send.finish(deadline, || ctl.check())?;
                        if i + 1 < n {
                            recv.post()?;
                        }
                    }
                    Ok(false)
                }?;
                if ended_early {
                    // Cancel the receive still posted for a ping that will not come.
                    self.drain_now();
                }
                Ok(())
            }
            TestKind::PutBw | TestKind::GetBw => {
                // One-sided: nothing to post, but keep progressing (software RMA emulation, e.g.
                // over tcp, needs the target's worker) until the initiator says it is done.
                let _ = ready.send(());
                let mut i = 0u32;
                while !ctl.stopped() {
                    w.progress();
                    i = i.wrapping_add(1);
                    if i.is_multiple_of(CHECK_EVERY) {
                        ctl.check()?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Checks the payload (tag and put land here) and releases the case.
    pub fn target_finish(&mut self) -> (bool, Option<String>) {
        self.drain_now();
        let Some(mut case) = self.case.take() else {
            return (false, Some("no case prepared".into()));
        };
        // The registration holds the buffer; unmap it so the buffer can be read again. The peer
        // sent Finish after its last flush: nothing of it can still reach this memory.
        case.unregister();
        if case.setup.untouched {
            return (false, Some(UNTOUCHED.into()));
        }
        let seed = case.setup.seed;
        if case.setup.test == TestKind::GetBw {
            // The client checks what it read; the source buffer must still be intact.
            let whole = BlockLayout::single(case.buf.byte_len());
            return match case.buf.verify_blocks(whole, seed, seed) {
                Ok(()) => (true, None),
                Err(e) => (false, Some(format!("source buffer changed during get: {e}"))),
            };
        }
        let checked = match case.setup.kv {
            Some(kv) => case.buf.verify_moved(&moved(&kv, false), seed, other_seed(seed)),
            None => case.buf.verify_blocks(case.layout, seed, other_seed(seed)),
        };
        match checked {
            Ok(()) => (true, None),
            Err(e) => (false, Some(e.to_string())),
        }
    }
}
