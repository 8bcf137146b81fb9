//! Opening a tenant's PII engine: with `--pii-key-file`, its tokens are keyed by a secret
//! derived from the key and its vault is the encrypted file in its data directory; without,
//! a random secret and a vault in memory.

use std::path::PathBuf;

use crate::app::{Shared, StartError};
use crate::pii::{PiiEngine, Scope};

pub(crate) async fn open(
    shared: &Shared,
    tenant: Option<&str>,
    vault_file: PathBuf,
) -> Result<PiiEngine, StartError> {
    let size = shared.config.pii.pii_vault_size;
    let Some(key) = shared.pii_key.clone() else {
        return PiiEngine::with_random_secret(size).map_err(|e| StartError::Pii(e.to_string()));
    };
    let tenant = tenant.map(str::to_string);
    // Replaying a large vault file takes a while: off the async threads. A vault file that
    // cannot be opened (the shared volume failing over, a symlink planted at its path) does not
    // keep the tenant out: it is served with the same tokens from memory, and the log says why
    // the file is not used.
    let engine = tokio::task::spawn_blocking(move || {
        let scope = Scope::of(tenant.as_deref());
        match PiiEngine::with_key(&key, scope, size, &vault_file) {
            Ok(engine) => engine,
            Err(e) => {
                tracing::error!(
                    "the PII vault file {} cannot be used ({e}): tokens of this tenant minted before are not restored by this server, and new ones last until it stops",
                    vault_file.display()
                );
                PiiEngine::new(key.token_secret(scope), size)
            }
        }
    })
    .await
    .expect("opening the PII vault does not panic");
    Ok(engine)
}
