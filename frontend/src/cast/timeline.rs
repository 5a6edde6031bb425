//! The idle-capped timeline: player time against recording time.

use breakglass_shared::recording::Event;

/// Event times with pauses longer than the idle cap shortened to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Player time of each event.
    times: Vec<f64>,
    /// Recording time of each event.
    raw: Vec<f64>,
}

impl Timeline {
    /// The timeline of `events` with gaps capped at `cap` seconds (`None`: no cap).
    pub fn new(events: &[Event], cap: Option<f64>) -> Timeline {
        let mut times = Vec::with_capacity(events.len());
        let mut raw = Vec::with_capacity(events.len());
        let (mut prev_raw, mut t) = (0.0f64, 0.0f64);
        for e in events {
            let gap = (e.time - prev_raw).max(0.0);
            t += match cap {
                Some(c) if c > 0.0 => gap.min(c),
                _ => gap,
            };
            prev_raw = e.time.max(prev_raw);
            times.push(t);
            raw.push(prev_raw);
        }
        Timeline { times, raw }
    }

    /// Player length in seconds.
    pub fn duration(&self) -> f64 {
        self.times.last().copied().unwrap_or(0.0)
    }

    /// Player time `t` kept to the recording: 0 to its length, NaN as 0 (the start).
    pub fn within(&self, t: f64) -> f64 {
        // Not `f64::clamp`, which gives NaN back (and brings its own panic into the wasm):
        // `max` takes the number over NaN.
        t.max(0.0).min(self.duration())
    }

    /// Player time of event `i` (its end time for `i == len`).
    pub fn time_of(&self, i: usize) -> f64 {
        self.times
            .get(i)
            .copied()
            .unwrap_or_else(|| self.duration())
    }

    /// How many events happen at or before player time `t`.
    pub fn upto(&self, t: f64) -> usize {
        self.times.partition_point(|&x| x <= t)
    }

    /// Player time of recording time `raw` (for `?t=` links).
    pub fn player_time(&self, raw: f64) -> f64 {
        let i = self.raw.partition_point(|&x| x <= raw);
        if i == 0 {
            // Not `f64::clamp`: its check of the bounds brings a panic into the wasm.
            return raw.max(0.0).min(self.times.first().copied().unwrap_or(0.0));
        }
        let (t0, r0) = (self.times[i - 1], self.raw[i - 1]);
        match (self.times.get(i), self.raw.get(i)) {
            // Inside a (possibly capped) gap: move proportionally.
            (Some(&t1), Some(&r1)) if r1 > r0 => t0 + (raw - r0) / (r1 - r0) * (t1 - t0),
            _ => t0,
        }
    }

    /// Recording time of player time `t` (for "link to this moment").
    pub fn raw_time(&self, t: f64) -> f64 {
        let i = self.times.partition_point(|&x| x <= t);
        if i == 0 {
            return t.max(0.0);
        }
        let (t0, r0) = (self.times[i - 1], self.raw[i - 1]);
        match (self.times.get(i), self.raw.get(i)) {
            (Some(&t1), Some(&r1)) if t1 > t0 => r0 + (t - t0) / (t1 - t0) * (r1 - r0),
            _ => r0 + (t - t0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cast::tests::out;

    #[test]
    fn idle_cap_and_raw_time() {
        let events = vec![out(1.0, "a"), out(11.0, "b"), out(12.0, "c")];
        let tl = Timeline::new(&events, Some(2.0));
        assert_eq!(tl.duration(), 1.0 + 2.0 + 1.0);
        assert_eq!(tl.upto(2.9), 1);
        assert_eq!(tl.upto(3.0), 2);
        assert_eq!(tl.player_time(11.0), 3.0);
        assert_eq!(tl.player_time(6.0), 2.0, "halfway through the capped gap");
        assert_eq!(tl.raw_time(3.0), 11.0);
        assert_eq!(tl.raw_time(tl.player_time(11.5)), 11.5);
        assert_eq!(tl.player_time(0.5), 0.5, "before the first event");
        assert_eq!(tl.player_time(-1.0), 0.0);
        assert_eq!(tl.player_time(f64::NAN), 0.0);
        assert_eq!(tl.within(f64::NAN), 0.0);
        assert_eq!(tl.within(-1.0), 0.0);
        assert_eq!(tl.within(99.0), 4.0);
        assert_eq!(tl.within(2.5), 2.5);
        let uncapped = Timeline::new(&events, None);
        assert_eq!(uncapped.duration(), 12.0);
    }
}
