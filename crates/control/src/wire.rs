//! Control-channel framing: `ICBC` magic, protocol version, a bounded length, then a JSON body.
//!
//! The header layout (magic at 0..4, big-endian version at 4..6) is fixed across protocol versions,
//! so two different ic-bench releases can always tell each other which version they speak.

use crate::messages::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// First bytes of every control frame.
pub const MAGIC: [u8; 4] = *b"ICBC";
/// Version of the control protocol this build speaks; bumped on any incompatible message change.
/// v2: the server opens with a `challenge` (token admission, `icb_engine::admit`) instead of its hello.
pub const PROTOCOL_VERSION: u16 = 2;
/// Largest control message accepted: worker addresses and packed rkeys are a few KiB at most.
pub const MAX_FRAME_BYTES: u32 = 1 << 20;
const HEADER_LEN: usize = 12;
/// Once a frame's first byte arrived, the rest must follow within this long (a peer that stalls
/// mid-frame, slowloris-style, is cut).
pub const FRAME_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Why a frame could not be read or written; the session adds what it was doing at the time.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("peer closed the connection")]
    Closed,
    #[error("control connection failed: {0}")]
    Io(std::io::Error),
    #[error("the peer is not ic-bench (its control stream starts with {0}): check the address and port")]
    BadMagic(String),
    #[error(
        "peer speaks control protocol v{peer}, this ic-bench speaks v{ours}: use the same ic-bench version on both sides"
    )]
    Version { peer: u16, ours: u16 },
    #[error("control message of {0} bytes exceeds the 1 MiB limit: the peer is not ic-bench")]
    TooLarge(u32),
    #[error("malformed control message from the peer ({0}): use the same ic-bench version on both sides")]
    Malformed(String),
    #[error("the peer stalled for {0:.0} s in the middle of a control message")]
    Stalled(f64),
}

impl From<std::io::Error> for WireError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe => WireError::Closed,
            _ => WireError::Io(e),
        }
    }
}

/// Encodes one message as a complete frame.
pub fn encode(msg: &Message) -> Result<Vec<u8>, WireError> {
    let body = serde_json::to_vec(msg).map_err(|e| WireError::Malformed(e.to_string()))?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME_BYTES)
        .ok_or(WireError::TooLarge(u32::MAX))?;
    let mut frame = Vec::with_capacity(HEADER_LEN + body.len());
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    frame.extend_from_slice(&0u16.to_be_bytes());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Checks a frame header; returns the body length.
pub fn parse_header(h: &[u8; HEADER_LEN]) -> Result<u32, WireError> {
    if h[0..4] != MAGIC {
        let hex: Vec<String> = h[0..4].iter().map(|b| format!("{b:02x}")).collect();
        return Err(WireError::BadMagic(format!("bytes {}", hex.join(" "))));
    }
    let version = u16::from_be_bytes([h[4], h[5]]);
    if version != PROTOCOL_VERSION {
        return Err(WireError::Version {
            peer: version,
            ours: PROTOCOL_VERSION,
        });
    }
    let len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
    if len > MAX_FRAME_BYTES {
        return Err(WireError::TooLarge(len));
    }
    Ok(len)
}

/// Decodes and validates a frame body.
pub fn decode_body(body: &[u8]) -> Result<Message, WireError> {
    // serde's message quotes the peer's bytes (an unknown variant, a bad string): escaped and
    // bounded, so a peer cannot split or flood the line it ends up in.
    let msg: Message = serde_json::from_slice(body)
        .map_err(|e| WireError::Malformed(icb_core::error_line::quote_outside(&e.to_string())))?;
    msg.validate().map_err(|e| WireError::Malformed(e.to_string()))?;
    Ok(msg)
}

/// Reads one frame. No deadline here: callers wrap it (or the channel fed by it) in one.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Message, WireError> {
    let mut header = [0u8; HEADER_LEN];
    r.read_exact(&mut header).await?;
    let len = parse_header(&header)?;
    // The length is bounded above, so this allocation is at most 1 MiB.
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await?;
    decode_body(&body)
}

/// Reads one frame whose start may take any time (callers bound the wait between messages) but
/// whose remaining bytes must all arrive within `limit`.
pub async fn read_frame_within<R: AsyncRead + Unpin>(
    r: &mut R,
    limit: std::time::Duration,
) -> Result<Message, WireError> {
    let mut header = [0u8; HEADER_LEN];
    r.read_exact(&mut header[..1]).await?;
    let rest = async {
        r.read_exact(&mut header[1..]).await?;
        let len = parse_header(&header)?;
        let mut body = vec![0u8; len as usize];
        r.read_exact(&mut body).await?;
        decode_body(&body)
    };
    match tokio::time::timeout(limit, rest).await {
        Ok(r) => r,
        Err(_) => Err(WireError::Stalled(limit.as_secs_f64())),
    }
}

/// Writes one frame and flushes it.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, msg: &Message) -> Result<(), WireError> {
    let frame = encode(msg)?;
    w.write_all(&frame).await?;
    w.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(magic: &[u8; 4], version: u16, len: u32) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..4].copy_from_slice(magic);
        h[4..6].copy_from_slice(&version.to_be_bytes());
        h[8..12].copy_from_slice(&len.to_be_bytes());
        h
    }

    #[test]
    fn round_trips_a_message() {
        let frame = encode(&Message::Bye).unwrap();
        let h: [u8; HEADER_LEN] = frame[..HEADER_LEN].try_into().unwrap();
        let len = parse_header(&h).unwrap();
        assert_eq!(len as usize, frame.len() - HEADER_LEN);
        assert!(matches!(decode_body(&frame[HEADER_LEN..]).unwrap(), Message::Bye));
    }

    #[test]
    fn rejects_bad_headers_with_one_line_reasons() {
        let e = parse_header(&header(b"GET ", 1, 5)).unwrap_err().to_string();
        assert!(e.contains("not ic-bench") && e.contains("47 45 54 20"), "{e}");
        // An old (v1, pre-admission) peer is told plainly.
        let e = parse_header(&header(&MAGIC, 1, 5)).unwrap_err().to_string();
        assert_eq!(
            e,
            "peer speaks control protocol v1, this ic-bench speaks v2: use the same ic-bench version on both sides"
        );
        let e = parse_header(&header(&MAGIC, PROTOCOL_VERSION, u32::MAX))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "control message of 4294967295 bytes exceeds the 1 MiB limit: the peer is not ic-bench"
        );
        assert_eq!(
            parse_header(&header(&MAGIC, PROTOCOL_VERSION, MAX_FRAME_BYTES)).unwrap(),
            MAX_FRAME_BYTES
        );
    }

    #[test]
    fn rejects_malformed_bodies() {
        assert!(matches!(decode_body(b"{not json"), Err(WireError::Malformed(_))));
        assert!(matches!(
            decode_body(br#"{"type":"launch_missiles"}"#),
            Err(WireError::Malformed(_))
        ));
        let e = decode_body(br#"{"type":"error","message":""}"#);
        assert!(e.is_ok());
    }

    /// Found by the `control_frame` fuzz target: serde's error quoted the peer's unknown variant
    /// with its newlines, and at any length up to the frame limit.
    #[test]
    fn a_malformed_body_is_reported_on_one_bounded_line() {
        let e = decode_body(br#"{"type":"setup","test":"put_bw","memory":{"initiator":"cud\n\u001b[31mnnn","target":"host"},"size":8,"window":1,"seed":0}"#)
            .unwrap_err()
            .to_string();
        assert!(!e.chars().any(char::is_control), "{e}");
        assert!(e.contains(r"cud\n\u{1b}[31mnnn"), "{e}");
        let long = format!(r#"{{"type":"{}"}}"#, "x".repeat(100_000));
        let e = decode_body(long.as_bytes()).unwrap_err().to_string();
        assert!(
            e.len() < 600 && e.starts_with("malformed control message from the peer (unknown variant `xxx"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn reads_frames_and_reports_truncation_as_closed() {
        let frame = encode(&Message::Bye).unwrap();
        let mut ok: &[u8] = &frame;
        assert!(matches!(read_frame(&mut ok).await.unwrap(), Message::Bye));
        let mut short: &[u8] = &frame[..frame.len() - 1];
        assert!(matches!(read_frame(&mut short).await, Err(WireError::Closed)));
        let mut empty: &[u8] = &[];
        assert!(matches!(read_frame(&mut empty).await, Err(WireError::Closed)));
    }

    #[tokio::test]
    async fn a_frame_stalled_midway_is_cut_within_its_deadline() {
        let frame = encode(&Message::Bye).unwrap();
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(&frame[..5]).await.unwrap();
        let started = std::time::Instant::now();
        let r = read_frame_within(&mut server, std::time::Duration::from_millis(200)).await;
        assert!(matches!(r, Err(WireError::Stalled(_))), "{r:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        // A whole frame, however long it took to start, is read.
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(&frame).await.unwrap();
        let r = read_frame_within(&mut server, std::time::Duration::from_millis(200)).await;
        assert!(matches!(r, Ok(Message::Bye)), "{r:?}");
    }
}
