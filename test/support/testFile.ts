/**
 * Vitest setup: the test file being run is named in `MUSE_TEST_FILE` for the processes it starts,
 * and, when `MUSE_TEST_PROGRAMS_LOG` is set, in `<log>.pids/<worker pid>` for those started with an
 * environment of their own, so CI can tell which files run an optional program (see `.ci/run`).
 * (Setup files run again before each test file, ahead of its imports.)
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { expect } from "vitest"

const file = expect.getState().testPath
if (file) {
  process.env.MUSE_TEST_FILE = path.relative(process.cwd(), file)
  const log = process.env.MUSE_TEST_PROGRAMS_LOG
  if (log) {
    fs.mkdirSync(`${log}.pids`, { recursive: true })
    fs.writeFileSync(`${log}.pids/${process.pid}`, process.env.MUSE_TEST_FILE)
  }
}
