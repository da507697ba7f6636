//! What a UCX rank publishes in its hello (`metadata`, hex): its worker's address and the packed
//! rkey of its KV buffer, as one byte string — NIXL's ranks publish their agent's metadata in
//! the same field.

/// A peer's published address that does not decode (a corrupted or hostile line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadAddress {
    #[error("a UCX rank address shorter than its header")]
    Short,
    #[error("a UCX rank address of {total} bytes cannot hold a {worker}-byte worker address and an rkey")]
    Lengths { total: usize, worker: usize },
}

/// A UCX rank's worker address and buffer rkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankAddress {
    pub worker: Vec<u8>,
    pub rkey: Vec<u8>,
}

/// Neither part is ever near this (UCX worker addresses and rkeys are a few hundred bytes to a
/// few KiB); a larger length is a corrupted or hostile line, refused before any allocation.
const MAX_PART: usize = 1 << 20;

impl RankAddress {
    /// The worker address's length (4 bytes, little endian), the address, then the rkey.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.worker.len() + self.rkey.len());
        out.extend_from_slice(&(self.worker.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.worker);
        out.extend_from_slice(&self.rkey);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<RankAddress, BadAddress> {
        let (len, rest) = bytes.split_first_chunk::<4>().ok_or(BadAddress::Short)?;
        let len = u32::from_le_bytes(*len) as usize;
        if len == 0 || len > MAX_PART || len >= rest.len() || rest.len() - len > MAX_PART {
            return Err(BadAddress::Lengths {
                total: bytes.len(),
                worker: len,
            });
        }
        let (worker, rkey) = rest.split_at(len);
        Ok(RankAddress {
            worker: worker.to_vec(),
            rkey: rkey.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_round_trips_and_a_truncated_one_is_refused() {
        let a = RankAddress {
            worker: vec![1, 2, 3],
            rkey: vec![9, 8],
        };
        let bytes = a.encode();
        assert_eq!(bytes, [3, 0, 0, 0, 1, 2, 3, 9, 8]);
        assert_eq!(RankAddress::decode(&bytes).unwrap(), a);
        // No rkey after the address, a length past the end, no header, an empty address.
        for bad in [&bytes[..7], &[200, 0, 0, 0, 1][..], &[1, 0][..], &[0, 0, 0, 0, 5][..]] {
            assert!(RankAddress::decode(bad).is_err(), "{bad:?}");
        }
    }
}
