//! Reading a session's recording back, for the people who may watch or check it: the recorder
//! knows which stored version a row means and where its final hash is anchored.

use breakglass_shared::Session;

use super::Recorder;
use crate::recording::{segment::read_recording, RecordingStoreError, VerifyReport};

impl Recorder {
    /// The cast of `session`: the version on its row once the session is final, the latest
    /// stored while it is live (the row names a version only after the store took it).
    /// `Ok(None)` when nothing was recorded.
    pub async fn read(&self, session: &Session) -> Result<Option<Vec<u8>>, RecordingStoreError> {
        let Some(row) = &session.recording else {
            return Ok(None);
        };
        let live = !session.state.is_final();
        read_recording(self.store.as_ref(), row, live)
            .await
            .map(Some)
    }

    /// Checks the stored recording of `session` against the hash and size on its row, and,
    /// with a transparency log, the row's entry against the row's hash; `None` when nothing
    /// was recorded.
    pub async fn verify(&self, session: &Session) -> Option<VerifyReport> {
        let row = session.recording.as_ref()?;
        let log = self.log.as_deref();
        Some(crate::recording::verify(self.store.as_ref(), log, row, session.rekor.as_ref()).await)
    }
}
