//! The end of one case on the prefill side: both sides verify the payload and release the
//! case's buffers; the server's reply carries its view of the receive and its NIC counters, and
//! this side reads its own view of the rendezvous data it sent before its case goes.

use crate::control::{Control, unexpected};
use crate::error::EngineError;
use crate::messages::{CaseSetup, Message};
use crate::run_error::RunError;
use crate::runtime::Runtime;
use crate::session::{HELLO_TIMEOUT, case_label};
use crate::ucx_thread::UcxThread;
use icb_core::rails::nic_health::HealthSnapshot;

/// What [`finish`] learnt: the first verification error, the server's view of its receives and
/// this side's of its rendezvous data sends.
pub(crate) struct Finished {
    pub(crate) verify_error: Option<String>,
    pub(crate) receive: Option<icb_core::ProtocolView>,
    pub(crate) send: Option<icb_core::ProtocolView>,
    /// The server's NIC health counters once the case finished (absent from older servers).
    pub(crate) health: Option<HealthSnapshot>,
}

/// Verifies on both sides and releases the case's buffers.
pub(crate) async fn finish(
    control: &mut Control,
    thread: &UcxThread<Runtime>,
    setup: &CaseSetup,
) -> Result<Finished, EngineError> {
    let label = case_label(setup);
    let (send, local): (_, Result<(), RunError>) = thread
        .call(|rt: &mut Runtime| (rt.send_view(), rt.initiator_finish()))
        .await?;
    control.send(&Message::Finish, &label).await?;
    let (remote, receive, health) = match control.recv(&label, HELLO_TIMEOUT * 4).await? {
        Message::Finished {
            verified: true,
            receive,
            health,
            ..
        } => (None, receive, health),
        Message::Finished {
            detail,
            receive,
            health,
            ..
        } => (
            Some(format!(
                "decode side: {}",
                detail.unwrap_or_else(|| "payload not verified".into())
            )),
            receive,
            health,
        ),
        other => return Err(unexpected(&label, &other, "finished")),
    };
    Ok(Finished {
        verify_error: local.err().map(|e| format!("prefill side: {e}")).or(remote),
        receive,
        send,
        health,
    })
}
