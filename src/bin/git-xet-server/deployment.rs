//! The options that say where a deployment's state lives, shared by the server and by every
//! admin command so that they act on the same deployment.

use std::path::PathBuf;

use git_xet_deployment::{DeploymentConfig, IndexLocation, StoreLocation};

#[derive(clap::Args, Debug, Clone)]
pub(super) struct DeploymentArgs {
    /// Data directory: this process's working space and, unless --object-store and --index
    /// say otherwise, objects, index, repositories and secret [default: the per-user data
    /// directory].
    #[arg(long, env = "GIT_XET_SERVER_DATA")]
    pub data: Option<PathBuf>,
    /// Where xorbs and shards are stored: a directory, or `s3://BUCKET[/PREFIX]` (configured
    /// by AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
    /// AWS_ALLOW_HTTP) [default: the data directory].
    #[arg(long, env = "GIT_XET_SERVER_OBJECT_STORE", value_name = "URL")]
    pub object_store: Option<String>,
    /// While moving the object store (`storage migrate`): the old store, read for objects
    /// --object-store lacks, never written [default: none].
    #[arg(long, env = "GIT_XET_SERVER_OBJECT_STORE_FALLBACK", value_name = "URL")]
    pub object_store_fallback: Option<String>,
    /// The index: `sqlite:PATH` or `postgres://USER@HOST/DB` [default: sqlite:DATA/index.sqlite].
    #[arg(long, env = "GIT_XET_SERVER_INDEX", value_name = "URL")]
    pub index: Option<String>,
}

impl DeploymentArgs {
    /// The data directory (made absolute: hosted-repository commands run git elsewhere).
    pub fn data_dir(&self) -> anyhow::Result<PathBuf> {
        let dir = super::data_dir(self.data.clone())?;
        Ok(std::path::absolute(&dir).unwrap_or(dir))
    }

    pub fn config(&self) -> anyhow::Result<DeploymentConfig> {
        let data = self.data_dir()?;
        let mut config = DeploymentConfig::embedded(&data);
        if let Some(store) = &self.object_store {
            config.object_store = StoreLocation::parse(store)?;
        }
        if let Some(old) = &self.object_store_fallback {
            config.object_store_fallback = Some(StoreLocation::parse(old)?);
        }
        if let Some(index) = &self.index {
            config.index = IndexLocation::parse(index)?;
        }
        Ok(config)
    }
}
