//! Each side's own view of a tag case's rendezvous, read from its UCX's protocol tables
//! (`ucp_worker_print_info`; the glob [`super::RENDEZVOUS_TABLES`] keeps them to the rendezvous
//! data tables): the receiver's "rendezvous data fetch" rows, the sender's "rendezvous data
//! send" rows. `icb_core::classify::classify_tag` decides which of them names the data path.

use super::*;
use icb_core::ProtocolView;
use icb_core::classify::proto_tables;

impl Runtime {
    /// What this side's UCX chose for the current tag case's rendezvous receives, from its own
    /// "rendezvous data fetch" tables (the receive request's info string names no protocol).
    /// `None` for RMA cases, and where UCX printed no table for the case's memory and size
    /// (eager messages, an older UCX, a user's `UCX_PROTO_INFO` that hides them).
    pub fn receive_view(&self) -> Option<ProtocolView> {
        let (tables, memory, size) = self.tag_tables()?;
        proto_tables::receive_view(&tables, memory, size)
    }

    /// How this side's UCX sent the current tag case's rendezvous data where the receiver had
    /// it send them (a put scheme), from its own "rendezvous data send" tables. `None` for RMA
    /// cases, and where UCX printed no such table (its receivers always read, an older UCX, a
    /// user's `UCX_PROTO_INFO` that hides them).
    pub fn send_view(&self) -> Option<ProtocolView> {
        let (tables, memory, size) = self.tag_tables()?;
        proto_tables::send_view(&tables, memory, size)
    }

    /// The worker's protocol tables with the current tag case's memory and message size.
    fn tag_tables(&self) -> Option<(Vec<proto_tables::ProtoTable>, icb_core::MemoryPair, u64)> {
        let case = self.case.as_ref()?;
        if case.setup.test.is_rma() {
            return None;
        }
        let text = self.worker.print_info()?;
        Some((proto_tables::parse(&text), case.setup.memory, case.layout.block as u64))
    }
}
