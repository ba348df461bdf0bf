//! A synchronous facade for callers without an async runtime: it blocks on each call on the
//! process's runtime ([`git_xet_io::runtime`]).

use std::path::Path;

use crate::download::{DownloadOptions, DownloadOutcome};
use crate::error::{ClientError, Result};
use crate::progress::ProgressFn;
use crate::upload::{FileUpload, UploadSession, UploadSummary};
use crate::{CasClient, ClientConfig};
use git_xet_core::MerkleHash;

/// [`CasClient`] with blocking methods. Do not use it from inside an async runtime.
pub struct BlockingClient {
    runtime: tokio::runtime::Handle,
    client: CasClient,
}

/// [`UploadSession`] with blocking methods.
pub struct BlockingUpload<'a> {
    runtime: &'a tokio::runtime::Handle,
    session: UploadSession,
}

impl BlockingClient {
    pub fn new(config: ClientConfig) -> Result<Self> {
        let runtime = git_xet_io::runtime::handle()
            .map_err(|e| ClientError::Aborted(format!("cannot start the async runtime: {e}")))?;
        let client = CasClient::new(config)?;
        Ok(BlockingClient { runtime, client })
    }

    pub fn client(&self) -> &CasClient {
        &self.client
    }

    pub fn start_upload(&self) -> Result<BlockingUpload<'_>> {
        let session = self.runtime.block_on(self.client.start_upload())?;
        Ok(BlockingUpload {
            runtime: &self.runtime,
            session,
        })
    }

    /// Uploads files in one session.
    pub fn upload_files(&self, paths: &[&Path]) -> Result<UploadSummary> {
        let mut session = self.start_upload()?;
        for path in paths {
            session.add_file(path, None)?;
        }
        session.finish()
    }

    pub fn download(
        &self,
        file_hash: &MerkleHash,
        output: &Path,
        options: DownloadOptions,
    ) -> Result<DownloadOutcome> {
        self.runtime
            .block_on(self.client.download(file_hash, output, options))
    }
}

impl BlockingUpload<'_> {
    pub fn add_file(&mut self, path: &Path, progress: Option<ProgressFn>) -> Result<FileUpload> {
        self.runtime.block_on(self.session.add_file(path, progress))
    }

    pub fn finish(self) -> Result<UploadSummary> {
        self.runtime.block_on(self.session.finish())
    }
}
