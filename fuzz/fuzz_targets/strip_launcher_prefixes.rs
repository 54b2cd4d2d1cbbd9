#![no_main]
use libfuzzer_sys::fuzz_target;
use engine::evidence::parsers::strip_launcher_prefixes;

// The launcher-prefix stripper every text parser runs first; its line map must stay in range.
fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let stripped = strip_launcher_prefixes(s);
        let lines = stripped.text.lines().count();
        for line in 1..=lines + 1 {
            let original = stripped.original_line(line);
            assert!(original >= 1 && original <= s.lines().count().max(1) + 1);
        }
    }
});
