import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { runnable } from "../src/internal/bundled.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "musekit-bundled-test-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

describe("binaries shipped in npm packages", () => {
  it("a binary installed without its execute bit is made runnable", () => {
    const file = path.join(dir, "tool")
    fs.writeFileSync(file, "#!/bin/sh\necho ran\n", { mode: 0o644 })
    const got = runnable(file)
    expect(execFileSync(got).toString()).toBe("ran\n")
  })

  // root may change the mode of any file, so the copy is only needed (and testable) for other users
  it.skipIf(process.getuid?.() === 0)(
    "in a read-only install, an executable copy is made once in a private folder",
    () => {
      const ro = path.join(dir, "ro")
      fs.mkdirSync(ro)
      const file = path.join(ro, "tool")
      fs.writeFileSync(file, "#!/bin/sh\necho copy\n", { mode: 0o444 })
      fs.chmodSync(ro, 0o555)
      try {
        const got = runnable(file)
        expect(got).not.toBe(file)
        expect(fs.statSync(got).mode & 0o700).toBe(0o700)
        expect(execFileSync(got).toString()).toBe("copy\n")
        expect(runnable(file)).toBe(got)
      } finally {
        fs.chmodSync(ro, 0o755)
      }
    }
  )
})
