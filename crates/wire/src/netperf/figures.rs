//! What a netserver counted in one test, as netchar's client reads it from the OMNI results and
//! netchar's server's driver hands it in: the meaningful fields of [`OmniResults`], without the
//! words netserver leaves from its previous message.

use super::omni::{field_text, OmniResults};

/// The server's CPU figures (percent), when it measured them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuFigures {
    /// Utilisation of all CPUs together.
    pub util: f32,
    /// User share.
    pub user: f32,
    /// System share.
    pub system: f32,
    /// I/O wait share.
    pub iowait: f32,
    /// Interrupts.
    pub irq: f32,
    /// Soft interrupts.
    pub softirq: f32,
    /// The busiest CPU's utilisation.
    pub peak_util: f32,
    /// The busiest CPU.
    pub peak_cpu: i32,
}

/// What a server counted in one test, the meaningful part of [`OmniResults`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerCounts {
    /// Bytes received.
    pub bytes_received: u64,
    /// recv() calls that returned data.
    pub recv_calls: u32,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// send() calls.
    pub send_calls: u32,
    /// Completed transactions (request/response tests; 0 for streams).
    pub transactions: u32,
    /// SO_RCVBUF at the end.
    pub recv_buf_size: i32,
    /// SO_SNDBUF at the end.
    pub send_buf_size: i32,
    /// TCP retransmissions; `None` for UDP or when unknown (−1 on the wire).
    pub retransmits: Option<u32>,
    /// CPU figures, when measured.
    pub cpu: Option<CpuFigures>,
    /// How the CPU was measured (netlib.h numbering; 0 unknown, 8 /proc/stat). netserver sends
    /// it even when it did not measure (0 then, in a fresh process).
    pub cpu_method: u32,
    /// CPUs counted (0 when not measured).
    pub cpus: u32,
    /// The data connection's congestion control, when the request asked for it (TCP).
    pub congestion_control: Option<String>,
}

/// The server's figures as netchar's client reads them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerFigures {
    /// The server's elapsed seconds (from its response to its end).
    pub elapsed_seconds: f32,
    /// What it counted.
    pub counts: ServerCounts,
}

impl ServerFigures {
    /// The meaningful fields of a results message: CPU only when the response said it is
    /// measured (else those words are leftovers), retransmits unless −1, the congestion control
    /// when reported.
    pub fn from_results(r: &OmniResults, cpu_measured: bool) -> Self {
        let cpu = cpu_measured.then_some(CpuFigures {
            util: r.cpu_util,
            user: r.cpu_percent_user,
            system: r.cpu_percent_system,
            iowait: r.cpu_percent_iowait,
            irq: r.cpu_percent_irq,
            softirq: r.cpu_percent_swintr,
            peak_util: r.peak_cpu_util,
            peak_cpu: r.peak_cpu_id,
        });
        Self {
            elapsed_seconds: r.elapsed_time,
            counts: ServerCounts {
                bytes_received: r.bytes_received,
                recv_calls: r.recv_calls,
                bytes_sent: r.bytes_sent,
                send_calls: r.send_calls,
                transactions: r.trans_received,
                recv_buf_size: r.recv_buf_size,
                send_buf_size: r.send_buf_size,
                retransmits: u32::try_from(r.transport_retrans).ok(),
                cpu,
                cpu_method: r.cpu_method,
                cpus: r.num_cpus,
                congestion_control: Some(field_text(&r.cong_control)).filter(|s| !s.is_empty()),
            },
        }
    }
}

/// netperf's letter for a CPU method number (`format_cpu_method`), as it prints it.
pub fn cpu_method_letter(method: u32) -> char {
    match method {
        0 => 'U',
        1 => 'I',
        2 => 'P',
        3 => 'T',
        4 => 'L',
        5 => 'R',
        6 => 'N',
        7 => 'K',
        8 => 'S',
        9 => 'C',
        10 => 'E',
        11 => 'M',
        12 => 'O',
        _ => '?',
    }
}

#[cfg(test)]
mod tests {
    use super::super::omni::text_field;
    use super::super::Message;
    use super::*;

    #[test]
    fn method_letters_are_netperfs() {
        assert_eq!((cpu_method_letter(0), cpu_method_letter(8), cpu_method_letter(99)), ('U', 'S', '?'));
    }

    #[test]
    fn results_and_figures() {
        let mut r = OmniResults::decode(&Message::new(98, 0));
        r.bytes_received = (5 << 32) | 7;
        r.transport_retrans = -1;
        r.cpu_util = 12.5;
        r.cong_control = text_field("cubic");
        let back = OmniResults::decode(&r.encode());
        assert_eq!(back, r);
        let f = ServerFigures::from_results(&back, false);
        assert_eq!((f.counts.bytes_received, f.counts.retransmits, f.counts.cpu), ((5 << 32) | 7, None, None));
        assert_eq!(f.counts.congestion_control.as_deref(), Some("cubic"));
        assert_eq!(ServerFigures::from_results(&back, true).counts.cpu.map(|c| c.util), Some(12.5));
        assert_eq!(text_field::<4>("cubic"), *b"cub\0");
    }
}
