//! `ibv_devinfo` (plain, `-v`) and `ibv_devinfo -l` output.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = icb_probe::parse::parse_ibv_devinfo(&text);
    // First half as stdout, second as stderr (split on a char boundary).
    let mid = (text.len() / 2..=text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    let (a, b) = text.split_at(mid);
    let _ = icb_probe::parse::parse_ibv_devinfo_list(a, b);
});
