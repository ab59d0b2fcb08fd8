//! RFC 8879 certificate compression (brotli and zlib) for TLS 1.3.
//!
//! BoringSSL calls the compression callback on every handshake whose client offers an algorithm
//! we registered, with the Certificate message body as input. A site context serves one chain, so
//! the input only changes when the per-connection OCSP staple (carried in the leaf's entry)
//! changes: each compressor keeps the last few inputs with their compressed form, and a handshake
//! normally costs one lookup and a copy, never a compression.
//!
//! The same types decompress, so clients built on BoringSSL (tests, `tlsgate probe`) can offer
//! compression too.

use boring::ssl::{CertificateCompressionAlgorithm, CertificateCompressor, SslContextBuilder};
use parking_lot::Mutex;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Distinct inputs kept per context and algorithm (a staple refresh adds one).
const CACHE_ENTRIES: usize = 4;
/// Largest certificate message decompressed (BoringSSL also enforces its own limit).
const MAX_DECOMPRESSED: u64 = 1 << 20;

/// Process-wide counters (exported by `serve` at scrape time).
#[derive(Debug, Default)]
pub struct CompressionStats {
    /// Handshakes that sent a brotli-compressed certificate.
    pub brotli_handshakes: AtomicU64,
    /// Handshakes that sent a zlib-compressed certificate.
    pub zlib_handshakes: AtomicU64,
    /// Bytes saved on the wire by compression, summed over handshakes.
    pub bytes_saved: AtomicU64,
    /// Compressions actually computed (cache misses): once per certificate and algorithm,
    /// plus once per OCSP staple change.
    pub computed: AtomicU64,
    /// Certificates decompressed (client side).
    pub decompressed: AtomicU64,
}

/// The counters of this process.
pub static STATS: CompressionStats = CompressionStats {
    brotli_handshakes: AtomicU64::new(0),
    zlib_handshakes: AtomicU64::new(0),
    bytes_saved: AtomicU64::new(0),
    computed: AtomicU64::new(0),
    decompressed: AtomicU64::new(0),
};

/// An uncompressed Certificate message body and its compressed form.
type Entry = (Arc<[u8]>, Arc<[u8]>);

/// Compressed forms keyed by their uncompressed bytes, most recent first.
#[derive(Default)]
struct Cache(Mutex<Vec<Entry>>);

impl Cache {
    fn get_or_compress(
        &self,
        input: &[u8],
        compress: impl FnOnce(&[u8]) -> io::Result<Vec<u8>>,
    ) -> io::Result<Arc<[u8]>> {
        if let Some((_, out)) = self.0.lock().iter().find(|(i, _)| **i == *input) {
            return Ok(out.clone());
        }
        let out: Arc<[u8]> = compress(input)?.into();
        STATS.computed.fetch_add(1, Relaxed);
        let mut entries = self.0.lock();
        entries.insert(0, (input.into(), out.clone()));
        entries.truncate(CACHE_ENTRIES);
        Ok(out)
    }
}

/// Brotli (algorithm 2), compressed at quality 11 once per certificate.
#[derive(Default)]
pub struct Brotli(Cache);

/// Zlib (algorithm 1), compressed at level 9 once per certificate.
#[derive(Default)]
pub struct Zlib(Cache);

/// Brotli-compresses `input` at the highest quality.
pub fn brotli_compress(input: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len());
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, 11, 22);
        w.write_all(input)?;
        w.flush()?;
    }
    Ok(out)
}

/// Zlib-compresses `input` at the highest level.
pub fn zlib_compress(input: &[u8]) -> io::Result<Vec<u8>> {
    let mut w = flate2::write::ZlibEncoder::new(Vec::with_capacity(input.len()), flate2::Compression::best());
    w.write_all(input)?;
    w.finish()
}

fn sent(input: &[u8], out: &[u8], counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
    // CompressedCertificate carries 8 bytes of lengths and algorithm, Certificate 4 of header.
    let saved = (input.len() + 4).saturating_sub(out.len() + 8);
    STATS.bytes_saved.fetch_add(saved as u64, Relaxed);
}

fn bounded_copy(mut reader: impl Read, output: &mut impl Write) -> io::Result<()> {
    let mut buf = Vec::new();
    reader.by_ref().take(MAX_DECOMPRESSED + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_DECOMPRESSED {
        return Err(io::Error::other("decompressed certificate too large"));
    }
    STATS.decompressed.fetch_add(1, Relaxed);
    output.write_all(&buf)
}

impl CertificateCompressor for Brotli {
    const ALGORITHM: CertificateCompressionAlgorithm = CertificateCompressionAlgorithm::BROTLI;
    const CAN_COMPRESS: bool = true;
    const CAN_DECOMPRESS: bool = true;

    fn compress<W: Write>(&self, input: &[u8], output: &mut W) -> io::Result<()> {
        let out = self.0.get_or_compress(input, brotli_compress)?;
        sent(input, &out, &STATS.brotli_handshakes);
        output.write_all(&out)
    }

    fn decompress<W: Write>(&self, input: &[u8], output: &mut W) -> io::Result<()> {
        bounded_copy(brotli::Decompressor::new(input, 4096), output)
    }
}

impl CertificateCompressor for Zlib {
    const ALGORITHM: CertificateCompressionAlgorithm = CertificateCompressionAlgorithm::ZLIB;
    const CAN_COMPRESS: bool = true;
    const CAN_DECOMPRESS: bool = true;

    fn compress<W: Write>(&self, input: &[u8], output: &mut W) -> io::Result<()> {
        let out = self.0.get_or_compress(input, zlib_compress)?;
        sent(input, &out, &STATS.zlib_handshakes);
        output.write_all(&out)
    }

    fn decompress<W: Write>(&self, input: &[u8], output: &mut W) -> io::Result<()> {
        bounded_copy(flate2::read::ZlibDecoder::new(input), output)
    }
}

/// Registers brotli (preferred) and zlib on a context, each with its own cache.
pub fn install(builder: &mut SslContextBuilder) -> Result<(), boring::error::ErrorStack> {
    builder.add_certificate_compression_algorithm(Brotli::default())?;
    builder.add_certificate_compression_algorithm(Zlib::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_cache() {
        let input: Vec<u8> = (0..3000u32).map(|i| (i % 37) as u8).collect();
        let b = Brotli::default();
        let mut first = Vec::new();
        b.compress(&input, &mut first).unwrap();
        let computed = STATS.computed.load(Relaxed);
        let mut second = Vec::new();
        b.compress(&input, &mut second).unwrap();
        assert_eq!(first, second);
        assert_eq!(STATS.computed.load(Relaxed), computed, "second handshake hit the cache");
        assert!(first.len() < input.len() / 4);
        let mut back = Vec::new();
        b.decompress(&first, &mut back).unwrap();
        assert_eq!(back, input);
        let z = Zlib::default();
        let mut zc = Vec::new();
        z.compress(&input, &mut zc).unwrap();
        let mut back = Vec::new();
        z.decompress(&zc, &mut back).unwrap();
        assert_eq!(back, input);
    }
}
