import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Sandbox as OsSandbox } from "@musekit/node"
import { beforeAll, describe, expect, it } from "vitest"
import { bin, ensureBuilt, muse, pathWithout, readLog, type Sandbox, sandbox, writeScript } from "./support/cli.js"
import { spawnInTerminal } from "./support/terminal.js"

// The OS sandbox through the real binary: --sandbox and the config key recorded in session.started,
// a command the sandbox stops told to the model as "blocked by the sandbox", replay unaffected, a
// headless run that cannot let a command out, and the notice where no sandbox can run.

beforeAll(() => ensureBuilt(), 240_000)

const available = OsSandbox.detect().available

/** A folder outside the project and outside /tmp (a sandboxed command has a /tmp of its own). */
const outsideDir = () => {
  const base = fs.existsSync("/var/tmp") ? "/var/tmp" : os.homedir()
  return fs.realpathSync(fs.mkdtempSync(path.join(base, "muse-cli-sbx-")))
}

const project = (sb: Sandbox) => {
  const dir = path.join(sb.root, "project")
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "README.md"), "# Project\n")
  return dir
}

/** One reply that runs `command` (optionally asking to leave the sandbox), then "Done.". */
const shellScript = (sb: Sandbox, command: string, unsandboxed = false) =>
  writeScript(sb, "shell", {
    replies: [
      {
        steps: [
          {
            text: "Running it.",
            tools: [{ name: "run_shell", params: { command, ...(unsandboxed ? { unsandboxed } : {}) } }]
          },
          { text: "Done." }
        ]
      }
    ]
  })

const started = (sb: Sandbox, session: string) => readLog(sb, session).find((e) => e.type === "session.started")!

const runJson = (sb: Sandbox, cwd: string, script: string, args: ReadonlyArray<string>, env?: NodeJS.ProcessEnv) => {
  const r = muse(["run", "do it", "--script", script, "--output-format", "json", ...args], {
    sb,
    cwd,
    ...(env ? { env } : {})
  })
  const result = r.stdout.trim().startsWith("{") ? JSON.parse(r.stdout.trim()) : undefined
  // what the run says to the user: stderr, and the notices of the JSON result
  const said = [r.stderr, ...((result?.output as Array<string> | undefined) ?? [])].join("\n")
  return { ...r, result, said }
}

describe.skipIf(!available)("muse and the OS sandbox", () => {
  it("/status says what the session's sandbox uses: a long-lived one that fell back to one per command says why", async () => {
    const sb = sandbox()
    const cwd = project(sb)
    // a bwrap that refuses to run the supervisor and runs everything else
    const fakeDir = path.join(sb.root, "fake-bin")
    fs.mkdirSync(fakeDir)
    fs.writeFileSync(
      path.join(fakeDir, "bwrap"),
      `#!/bin/sh\ncase "$*" in *"use strict"*) echo "no supervisor here" >&2; exit 1;; esac\nexec "${OsSandbox.detect().program}" "$@"\n`,
      { mode: 0o755 }
    )
    const script = shellScript(sb, "echo inside > made.txt")
    const t = spawnInTerminal(process.execPath, [bin, "--script", script, "--approval-mode", "auto"], {
      cwd,
      env: { ...sb.env, PATH: `${fakeDir}${path.delimiter}${sb.env.PATH ?? process.env.PATH ?? ""}` }
    })
    try {
      await t.waitFor(/\n› $/m, 40_000)
      t.type("do it\r")
      await t.waitFor("Done.", 60_000)
      expect(fs.readFileSync(path.join(cwd, "made.txt"), "utf8")).toBe("inside\n")
      t.type("/status\r")
      await t.waitFor("supervisor here)", 20_000)
      // (the line wraps at the terminal's width)
      expect(t.screen().join(" ").replace(/\s+/g, " ")).toContain(
        "a new sandbox for each command (the sandbox could not start: exit 1: no supervisor here)"
      )
    } finally {
      t.kill()
    }
  }, 120_000)

  it("workspace-write by default: recorded, the write outside blocked and said so, the replay verifies", () => {
    const sb = sandbox()
    const cwd = project(sb)
    const outside = outsideDir()
    try {
      const script = shellScript(sb, `echo pwned > ${outside}/escape.txt; echo inside > made.txt`)
      const r = runJson(sb, cwd, script, ["--approval-mode", "auto"])
      expect(r.code, r.stderr).toBe(0)
      expect(fs.existsSync(path.join(outside, "escape.txt"))).toBe(false)
      expect(fs.readFileSync(path.join(cwd, "made.txt"), "utf8")).toBe("inside\n")
      const session = r.result.session as string
      expect(started(sb, session).data.config.sandbox).toEqual({ mode: "workspace-write" })
      const log = JSON.stringify(readLog(sb, session))
      expect(log).toContain(`blocked by the sandbox: write to ${outside}/escape.txt: outside the writable folders`)
      expect(r.said).not.toContain("no OS sandbox")
      const replay = muse(["replay", session, "--verify"], { sb, cwd })
      expect(replay.code, replay.stderr).toBe(0)
    } finally {
      fs.rmSync(outside, { recursive: true, force: true })
    }
  }, 120_000)

  it("--sandbox and the config key choose the mode; a headless run cannot let a command out", () => {
    const sb = sandbox()
    const cwd = project(sb)
    const outside = outsideDir()
    try {
      fs.mkdirSync(path.join(sb.home, ".config", "muse"), { recursive: true })
      fs.writeFileSync(
        path.join(sb.home, ".config", "muse", "config.json"),
        JSON.stringify({ sandbox: { mode: "read-only", network: { allow: ["registry.npmjs.org"] } } })
      )
      const ro = runJson(sb, cwd, shellScript(sb, "echo x > here.txt"), ["--approval-mode", "auto"])
      expect(ro.code, ro.stderr).toBe(0)
      expect(fs.existsSync(path.join(cwd, "here.txt"))).toBe(false)
      expect(started(sb, ro.result.session).data.config.sandbox).toEqual({
        mode: "read-only",
        network: { allow: ["registry.npmjs.org"] }
      })
      expect(JSON.stringify(readLog(sb, ro.result.session))).toContain(
        "the sandbox is read-only; only /tmp is writable"
      )

      // asking to run outside is denied headless, and nothing ran outside
      const asked = runJson(sb, cwd, shellScript(sb, `echo x > ${outside}/out.txt`, true), ["--approval-mode", "auto"])
      expect(asked.code, asked.stderr).toBe(0)
      expect(fs.existsSync(path.join(outside, "out.txt"))).toBe(false)
      expect(asked.said).toContain("denied run_shell outside the sandbox")
      expect(asked.said).toContain("no one can give it in a headless run")

      // the flag beats the file
      const off = runJson(sb, cwd, shellScript(sb, `echo x > ${outside}/off.txt`), [
        "--approval-mode",
        "auto",
        "--sandbox",
        "off"
      ])
      expect(off.code, off.stderr).toBe(0)
      expect(fs.existsSync(path.join(outside, "off.txt"))).toBe(true)
      expect(started(sb, off.result.session).data.config.sandbox.mode).toBe("off")

      const bad = muse(["run", "x", "--sandbox", "sometimes"], { sb, cwd })
      expect(bad.code).toBe(2)
      expect(bad.stderr).toContain("workspace-write, read-only, off")
    } finally {
      fs.rmSync(outside, { recursive: true, force: true })
    }
  }, 180_000)
})

describe("muse where no sandbox can run", () => {
  it("says so once at start and runs the command guarded by approvals only", () => {
    const sb = sandbox()
    const cwd = project(sb)
    const env = { PATH: pathWithout(sb.root, "bwrap") }
    const r = runJson(sb, cwd, shellScript(sb, "echo x > here.txt"), ["--approval-mode", "auto"], env)
    expect(r.code, r.stderr).toBe(0)
    if (process.platform === "linux") {
      expect(r.said.match(/no OS sandbox for shell commands/g)).toHaveLength(1)
      expect(r.said).toContain("apt-get install bubblewrap")
      expect(fs.existsSync(path.join(cwd, "here.txt"))).toBe(true)
    }
    // --sandbox off says it was meant: nothing to warn about
    const off = runJson(sb, cwd, shellScript(sb, "true"), ["--approval-mode", "auto", "--sandbox", "off"], env)
    expect(off.said).not.toContain("no OS sandbox")
  }, 120_000)
})
