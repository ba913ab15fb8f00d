/**
 * Vitest global setup: every test run gets one temporary folder of its own (TMPDIR points into it
 * for the test workers and the processes they start), removed when the run ends, so test runs leave
 * nothing behind in the system's temp folder. `MUSE_KEEP_TEST_TMP=1` keeps it for a post-mortem.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export default function setup(): () => void {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "musekit-test-run-"))
  process.env.TMPDIR = root
  return () => {
    if (process.env.MUSE_KEEP_TEST_TMP === "1") {
      console.log(`test temp folder kept: ${root}`)
      return
    }
    fs.rmSync(root, { recursive: true, force: true, maxRetries: 3 })
  }
}
