//! Helpers for the server tests: build xorbs and shards with the protocol core, talk to the
//! CAS API over real HTTP, and rebuild files from reconstructions like a client would.
#![allow(dead_code)]

use std::io::Write;
use std::net::TcpStream;

use git_xet_core::chunker::chunk_lengths;
use git_xet_core::hash::{chunk_hash, file_hash, sha256_as_merkle, verification_hash};
use git_xet_core::reconstruction::Reconstruction;
use git_xet_core::shard::{FileInfo, FileTerm, Shard, XorbBlock};
use git_xet_core::xorb::{ChunkRecords, SerializedXorb, XorbBuilder};
use git_xet_core::MerkleHash;
use reqwest::blocking::{Client, Response};
use sha2::Digest;

use crate::support::TestServer;

/// Opens a raw connection and sends a request head with a bearer token and `Content-Length:
/// len`; the body is the caller's to send, in part or not at all.
pub fn raw_request(
    server: &TestServer,
    method: &str,
    path: &str,
    token: &str,
    len: usize,
) -> TcpStream {
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nContent-Length: {len}\r\n\r\n",
        server.addr(),
    )
    .unwrap();
    stream
}

/// Polls `cond` for up to 10 s.
pub fn wait_for(cond: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !cond() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

pub fn client() -> Client {
    Client::builder()
        .timeout(std::time::Duration::from_secs(120))
        .build()
        .unwrap()
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(data).into()
}

pub fn sha256_hex(data: &[u8]) -> String {
    git_xet_core::hash::sha256_hex(&sha256(data))
}

/// One chunk of a file: its hash and bytes.
#[derive(Clone)]
pub struct Chunk {
    pub hash: MerkleHash,
    pub data: Vec<u8>,
}

pub fn chunks_of(data: &[u8]) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut pos = 0;
    for len in chunk_lengths(data) {
        let d = &data[pos..pos + len];
        out.push(Chunk {
            hash: chunk_hash(d),
            data: d.to_vec(),
        });
        pos += len;
    }
    out
}

/// Packs chunks into xorbs of at most `max_chunks` chunks each.
pub fn pack(chunks: &[Chunk], max_chunks: usize) -> Vec<SerializedXorb> {
    let mut xorbs = Vec::new();
    for group in chunks.chunks(max_chunks.max(1)) {
        let mut builder = XorbBuilder::new();
        for c in group {
            builder.push_data(&c.data).unwrap();
        }
        xorbs.push(builder.finish());
    }
    xorbs
}

/// The CAS block describing a xorb.
pub fn block(xorb: &SerializedXorb) -> XorbBlock {
    let f = &xorb.footer;
    XorbBlock::from_chunks(
        xorb.hash,
        (0..f.num_chunks()).map(|i| (f.chunk_hashes[i], f.unpacked_chunk_len(i))),
        0,
    )
}

/// A file made of whole xorbs (each term one whole xorb), with verification and sha256.
pub fn file_info(data: &[u8], xorbs: &[&SerializedXorb]) -> FileInfo {
    let mut terms = Vec::new();
    let mut verification = Vec::new();
    let mut all = Vec::new();
    for x in xorbs {
        let f = &x.footer;
        let n = f.num_chunks() as u32;
        terms.push(FileTerm {
            xorb_hash: x.hash,
            cas_flags: 0,
            unpacked_bytes: f.unpacked_len() as u32,
            chunk_start: 0,
            chunk_end: n,
        });
        verification.push(verification_hash(f.chunk_hashes.iter()));
        all.extend(
            (0..f.num_chunks()).map(|i| (f.chunk_hashes[i], u64::from(f.unpacked_chunk_len(i)))),
        );
    }
    FileInfo {
        file_hash: file_hash(all),
        terms,
        verification: Some(verification),
        sha256: Some(sha256_as_merkle(&sha256(data))),
    }
}

/// Everything a client uploads for one file.
pub struct Upload {
    pub data: Vec<u8>,
    pub xorbs: Vec<SerializedXorb>,
    pub shard: Shard,
    pub file_hash: MerkleHash,
}

impl Upload {
    /// Chunks `data` and packs it into xorbs of at most `max_chunks` chunks.
    pub fn new(data: Vec<u8>, max_chunks: usize) -> Upload {
        let xorbs = pack(&chunks_of(&data), max_chunks);
        let refs: Vec<&SerializedXorb> = xorbs.iter().collect();
        let file = file_info(&data, &refs);
        let shard = Shard {
            files: vec![file.clone()],
            xorbs: xorbs.iter().map(block).collect(),
        };
        Upload {
            file_hash: file.file_hash,
            data,
            xorbs,
            shard,
        }
    }

    pub fn random(len: usize, seed: u64, max_chunks: usize) -> Upload {
        Upload::new(crate::support::random_bytes(len, seed), max_chunks)
    }
}

/// A CAS client with one token.
pub struct Cas {
    pub base: String,
    pub token: String,
    pub http: Client,
}

impl Cas {
    pub fn new(server: &TestServer, repo: &str, scope: &str) -> Cas {
        Cas {
            base: server.url.clone(),
            token: server.token(repo, scope),
            http: client(),
        }
    }

    pub fn with_token(server: &TestServer, token: &str) -> Cas {
        Cas {
            base: server.url.clone(),
            token: token.to_string(),
            http: client(),
        }
    }

    /// Sends a xorb upload's head (with its full `Content-Length`) and the first half of
    /// its body over a raw connection, and returns the connection with the rest unsent.
    pub fn send_half_a_xorb(&self, server: &TestServer, xorb: &SerializedXorb) -> TcpStream {
        let path = format!("/v1/xorbs/default/{}", xorb.hash);
        let mut stream = raw_request(server, "POST", &path, &self.token, xorb.bytes.len());
        stream
            .write_all(&xorb.bytes[..xorb.bytes.len() / 2])
            .unwrap();
        stream
    }

    pub fn post_xorb_raw(&self, hash: &str, body: Vec<u8>) -> Response {
        self.http
            .post(format!("{}/v1/xorbs/default/{hash}", self.base))
            .bearer_auth(&self.token)
            .body(body)
            .send()
            .unwrap()
    }

    /// Uploads a xorb; returns `was_inserted`. Panics unless 200.
    pub fn post_xorb(&self, xorb: &SerializedXorb) -> bool {
        let r = self.post_xorb_raw(&xorb.hash.to_hex(), xorb.bytes.clone());
        let status = r.status();
        let text = r.text().unwrap();
        assert_eq!(status, 200, "xorb upload: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["was_inserted"].as_bool().expect("was_inserted")
    }

    pub fn post_shard_raw(&self, bytes: Vec<u8>) -> Response {
        self.http
            .post(format!("{}/v1/shards", self.base))
            .bearer_auth(&self.token)
            .body(bytes)
            .send()
            .unwrap()
    }

    /// Uploads a shard; returns `result`. Panics unless 200.
    pub fn post_shard(&self, shard: &Shard) -> u64 {
        let r = self.post_shard_raw(shard.to_upload_bytes());
        let status = r.status();
        let text = r.text().unwrap();
        assert_eq!(status, 200, "shard upload: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["result"].as_u64().expect("result")
    }

    /// Uploads every xorb and the shard.
    pub fn upload(&self, upload: &Upload) {
        for x in &upload.xorbs {
            self.post_xorb(x);
        }
        self.post_shard(&upload.shard);
    }

    pub fn reconstruction_raw(&self, file_hash: &str, range: Option<&str>) -> Response {
        let mut req = self
            .http
            .get(format!("{}/v1/reconstructions/{file_hash}", self.base))
            .bearer_auth(&self.token);
        if let Some(r) = range {
            req = req.header("Range", r);
        }
        req.send().unwrap()
    }

    pub fn reconstruction(
        &self,
        file_hash: &MerkleHash,
        range: Option<(u64, u64)>,
    ) -> Reconstruction {
        let range = range.map(|(a, b)| format!("bytes={a}-{b}"));
        let r = self.reconstruction_raw(&file_hash.to_hex(), range.as_deref());
        let status = r.status();
        let text = r.text().unwrap();
        assert_eq!(status, 200, "reconstruction: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Downloads a file (or bytes `a..=b`) through reconstruction and fetch URLs.
    pub fn download(&self, file_hash: &MerkleHash, range: Option<(u64, u64)>) -> Vec<u8> {
        let rec = self.reconstruction(file_hash, range);
        let mut out = rebuild(&self.http, &rec);
        out.drain(..rec.offset_into_first_range as usize);
        if let Some((a, b)) = range {
            out.truncate((b - a + 1) as usize);
        }
        out
    }
}

/// Concatenates the terms of a reconstruction, fetching each from its fetch URL.
pub fn rebuild(http: &Client, rec: &Reconstruction) -> Vec<u8> {
    let mut out = Vec::new();
    for term in &rec.terms {
        let fetch = rec.fetch_for(term).expect("fetch info covers the term");
        let r = http
            .get(&fetch.url)
            .header("Range", fetch.url_range.header_value())
            .send()
            .unwrap();
        assert_eq!(r.status(), 206, "xorb range fetch");
        let bytes = r.bytes().unwrap();
        assert_eq!(bytes.len() as u64, fetch.url_range.len());
        let before = out.len();
        for (k, record) in ChunkRecords::new(&bytes).enumerate() {
            let i = fetch.range.start + k as u32;
            if i >= term.range.start && i < term.range.end {
                record.unwrap().decode_into(&mut out).unwrap();
            }
        }
        assert_eq!(
            out.len() - before,
            term.unpacked_length as usize,
            "term length"
        );
    }
    out
}

/// Status and JSON body of a response.
pub fn json(r: Response) -> (u16, serde_json::Value) {
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// The error reason of a JSON error body.
pub fn reason(v: &serde_json::Value) -> String {
    v["error"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}
