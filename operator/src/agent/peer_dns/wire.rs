//! The few DNS messages the agent sends itself (RFC 1035 wire format): one question
//! for a name's A records, and the answer's addresses or "no such name". Pure, so every
//! malformed or truncated answer is a unit test away.

use std::net::Ipv4Addr;

/// Which of the cluster DNS's cache slots a question lands in. CoreDNS's cache keys an
/// answer by name, type and the question's DO and CD bits, so each of these questions
/// is answered afresh while another slot still holds a cached "no such name".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// What the system resolver asks: neither bit.
    System,
    /// Checking Disabled set.
    CheckingDisabled,
    /// DNSSEC OK set (in an EDNS0 OPT record).
    DnssecOk,
    /// Both.
    Both,
}

impl Slot {
    fn checking_disabled(self) -> bool {
        matches!(self, Slot::CheckingDisabled | Slot::Both)
    }

    fn dnssec_ok(self) -> bool {
        matches!(self, Slot::DnssecOk | Slot::Both)
    }
}

/// What an answer said about the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Its A records (empty: the name exists without one).
    Addresses(Vec<Ipv4Addr>),
    /// NXDOMAIN.
    NoSuchName,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("the name {0:?} cannot be asked for (empty label or one over 63 bytes)")]
    BadName(String),
    #[error("the DNS answer is cut short")]
    Truncated,
    #[error("the DNS answer is for another question (id {got}, expected {expected})")]
    OtherId { got: u16, expected: u16 },
    #[error("the DNS server answered with code {0}")]
    ServerError(u8),
}

const TYPE_A: u16 = 1;
const TYPE_OPT: u16 = 41;
const CLASS_IN: u16 = 1;
/// The UDP payload size the OPT record offers (the DNS flag day's default).
const EDNS_PAYLOAD: u16 = 1232;

/// The question for `name`'s A records, with recursion desired and the slot's bits.
pub fn query(id: u16, name: &str, slot: Slot) -> Result<Vec<u8>, WireError> {
    let mut message = Vec::with_capacity(name.len() + 32);
    message.extend_from_slice(&id.to_be_bytes());
    let flags: u16 = 0x0100 | if slot.checking_disabled() { 0x0010 } else { 0 };
    message.extend_from_slice(&flags.to_be_bytes());
    let additional: u16 = u16::from(slot.dnssec_ok());
    for count in [1u16, 0, 0, additional] {
        message.extend_from_slice(&count.to_be_bytes());
    }
    for label in name.trim_end_matches('.').split('.') {
        let length = u8::try_from(label.len())
            .ok()
            .filter(|n| (1..=63).contains(n))
            .ok_or_else(|| WireError::BadName(name.to_owned()))?;
        message.push(length);
        message.extend_from_slice(label.as_bytes());
    }
    message.push(0);
    message.extend_from_slice(&TYPE_A.to_be_bytes());
    message.extend_from_slice(&CLASS_IN.to_be_bytes());
    if slot.dnssec_ok() {
        // OPT: root name, type, payload size as class, TTL holding the DO bit.
        message.push(0);
        message.extend_from_slice(&TYPE_OPT.to_be_bytes());
        message.extend_from_slice(&EDNS_PAYLOAD.to_be_bytes());
        message.extend_from_slice(&0x0000_8000u32.to_be_bytes());
        message.extend_from_slice(&0u16.to_be_bytes());
    }
    Ok(message)
}

/// The answer to question `id`: its A records, or that the name does not exist.
pub fn answer(id: u16, message: &[u8]) -> Result<Answer, WireError> {
    let mut reader = Reader { message, at: 0 };
    let got = reader.u16()?;
    if got != id {
        return Err(WireError::OtherId { got, expected: id });
    }
    let flags = reader.u16()?;
    if flags & 0x0200 != 0 {
        // TC: the rest did not fit; the system resolver retries over TCP.
        return Err(WireError::Truncated);
    }
    let questions = reader.u16()?;
    let answers = reader.u16()?;
    reader.skip(4)?;
    match (flags & 0x000f) as u8 {
        0 => {}
        3 => return Ok(Answer::NoSuchName),
        code => return Err(WireError::ServerError(code)),
    }
    for _ in 0..questions {
        reader.skip_name()?;
        reader.skip(4)?;
    }
    let mut addresses = Vec::new();
    for _ in 0..answers {
        reader.skip_name()?;
        let kind = reader.u16()?;
        let class = reader.u16()?;
        reader.skip(4)?;
        let length = usize::from(reader.u16()?);
        let data = reader.take(length)?;
        if kind == TYPE_A
            && class == CLASS_IN
            && let Ok(octets) = <[u8; 4]>::try_from(data)
        {
            addresses.push(Ipv4Addr::from(octets));
        }
    }
    Ok(Answer::Addresses(addresses))
}

struct Reader<'a> {
    message: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).ok_or(WireError::Truncated)?;
        let bytes = self.message.get(self.at..end).ok_or(WireError::Truncated)?;
        self.at = end;
        Ok(bytes)
    }

    fn skip(&mut self, n: usize) -> Result<(), WireError> {
        self.take(n).map(|_| ())
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        let bytes = self.take(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    /// A name: labels up to the root, or up to a compression pointer (two bytes).
    fn skip_name(&mut self) -> Result<(), WireError> {
        loop {
            let length = self.take(1)?[0];
            match length {
                0 => return Ok(()),
                l if l & 0xc0 == 0xc0 => return self.skip(1),
                l => self.skip(usize::from(l))?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer as a server writes it: the question echoed, then each address as an A
    /// record whose name points back at the question's (compression).
    fn reply(id: u16, code: u8, addresses: &[[u8; 4]]) -> Vec<u8> {
        let question =
            query(id, "server-0.bench.default.svc.cluster.local", Slot::System).expect("question");
        let mut message = question[..12].to_vec();
        message[2] |= 0x80;
        message[3] = code;
        message[6..8].copy_from_slice(&(addresses.len() as u16).to_be_bytes());
        message.extend_from_slice(&question[12..]);
        for address in addresses {
            message.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4]);
            message.extend_from_slice(address);
        }
        message
    }

    #[test]
    fn each_slot_sets_its_own_bits() {
        let plain = query(7, "a.b", Slot::System).expect("question");
        assert_eq!(plain[..4], [0, 7, 0x01, 0x00]);
        assert_eq!(plain[10..12], [0, 0], "no additional record");
        assert_eq!(plain[12..], [1, b'a', 1, b'b', 0, 0, 1, 0, 1]);
        let cd = query(7, "a.b", Slot::CheckingDisabled).expect("question");
        assert_eq!(cd[3], 0x10);
        assert_eq!(cd.len(), plain.len());
        let both = query(7, "a.b.", Slot::Both).expect("question");
        assert_eq!(both[3], 0x10);
        assert_eq!(both[10..12], [0, 1], "the OPT record");
        assert_eq!(both[plain.len()..], [0, 0, 41, 4, 208, 0, 0, 0x80, 0, 0, 0]);
    }

    #[test]
    fn names_that_cannot_be_asked_for_are_refused() {
        for name in ["a..b", "", &"x".repeat(64)] {
            assert!(matches!(
                query(1, name, Slot::System),
                Err(WireError::BadName(_))
            ));
        }
    }

    #[test]
    fn the_addresses_of_an_answer_are_read() {
        let message = reply(42, 0, &[[10, 77, 1, 44], [10, 77, 2, 3]]);
        assert_eq!(
            answer(42, &message),
            Ok(Answer::Addresses(vec![
                Ipv4Addr::new(10, 77, 1, 44),
                Ipv4Addr::new(10, 77, 2, 3)
            ]))
        );
    }

    #[test]
    fn no_such_name_and_server_errors_are_told_apart() {
        assert_eq!(answer(5, &reply(5, 3, &[])), Ok(Answer::NoSuchName));
        assert_eq!(answer(5, &reply(5, 2, &[])), Err(WireError::ServerError(2)));
        assert_eq!(
            answer(6, &reply(5, 0, &[])),
            Err(WireError::OtherId {
                got: 5,
                expected: 6
            })
        );
    }

    #[test]
    fn a_truncated_answer_is_an_error_at_every_length() {
        let message = reply(9, 0, &[[10, 0, 0, 1]]);
        for cut in 0..message.len() {
            assert!(
                answer(9, &message[..cut]).is_err(),
                "cut at {cut} of {}",
                message.len()
            );
        }
        let mut flagged = message.clone();
        flagged[2] |= 0x02;
        assert_eq!(answer(9, &flagged), Err(WireError::Truncated));
    }
}
