/**
 * A runner rebuilding a session's workspace from its log (`restoreFiles`) and what it tells the
 * agent about the rest (`takeoverNote`, given to `muse resume --notice`), over a real file store,
 * real files and real processes.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Event } from "@musekit/core"
import { EventLogFile } from "@musekit/node"
import * as SessionCluster from "@musekit/pg/SessionCluster"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { baseOf, checkoutAt, restoreFiles, retryDelayMs, takeoverNote } from "../src/internal/cluster.js"
import { buggyRepo, ensureBuilt, muse, museAsync, readLog, sandbox, writeScript } from "./support/cli.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-cluster-"))
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

let seq = 0
const event = (type: string, data: unknown, agent = "main"): Event.Envelope =>
  ({ v: 1, seq: seq++, id: `e${seq}`, at: seq, agent, type, parent: null, data }) as unknown as Event.Envelope

describe("a workspace rebuilt from the log", () => {
  it("each try at a session starts from a fresh clone at the base commit, whatever the last try left", async () => {
    const repo = path.join(root, "origin")
    fs.mkdirSync(repo)
    const g = (cwd: string, ...args: Array<string>) =>
      execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim()
    g(repo, "init", "-q", "-b", "main")
    fs.writeFileSync(path.join(repo, "a.txt"), "base\n")
    g(repo, "add", "-A")
    g(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    const base = g(repo, "rev-parse", "HEAD")
    fs.writeFileSync(path.join(repo, "a.txt"), "later\n")
    g(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "later")
    const work = path.join(root, "runner")
    fs.mkdirSync(work)
    const dir = path.join(work, "s1")

    const first = await Effect.runPromise(checkoutAt(repo, base, dir, work))
    expect(first.ok).toBe(true)
    expect(fs.readFileSync(path.join(dir, "a.txt"), "utf8")).toBe("base\n")
    // what a try left: a changed file, an untracked one, a hook and a config entry inside .git
    fs.writeFileSync(path.join(dir, "a.txt"), "changed\n")
    fs.writeFileSync(path.join(dir, "new.txt"), "x\n")
    fs.writeFileSync(path.join(dir, ".git", "hooks", "post-checkout"), "#!/bin/sh\n")
    g(dir, "config", "alias.st", "status")
    const again = await Effect.runPromise(checkoutAt(repo, base, dir, work))
    expect(again.ok).toBe(true)
    expect(fs.existsSync(path.join(dir, ".git", "hooks", "post-checkout"))).toBe(false)
    expect(fs.readFileSync(path.join(dir, ".git", "config"), "utf8")).not.toContain("alias")
    expect(fs.readdirSync(dir).sort()).toEqual([".git", "a.txt"])
    expect(fs.readFileSync(path.join(dir, "a.txt"), "utf8")).toBe("base\n")
    expect(g(dir, "rev-parse", "HEAD")).toBe(base)
    const missing = await Effect.runPromise(checkoutAt(path.join(root, "nowhere"), base, dir, work))
    expect(missing.ok).toBe(false)
    expect(missing.err).toMatch(/nowhere/)
  })

  it("puts back each file as its last change left it; a content the store lacks is named, not fatal", async () => {
    const store = EventLogFile.makeStore({ dir: path.join(root, "state") })
    const put = (text: string) =>
      Effect.runPromise(
        Effect.scoped(Effect.flatMap(store.open("s", { create: true }), (log) => log.putBlob(text, { exact: true })))
      )
    const first = await put("one\n")
    const second = await put("two\n")
    const kept = await put("kept\n")
    const ws = path.join(root, "ws")
    fs.mkdirSync(ws)
    fs.writeFileSync(path.join(ws, "gone.txt"), "base\n")
    fs.writeFileSync(path.join(ws, "lost.txt"), "base\n")
    const events = [
      event("file.changed", { path: "a/notes.txt", before: null, after: first }),
      event("file.changed", { path: "a/notes.txt", before: first, after: second }),
      event("file.changed", { path: "gone.txt", before: kept, after: null }),
      event("file.changed", { path: "lost.txt", before: kept, after: "0".repeat(64) }),
      event("file.changed", { path: "../outside.txt", before: null, after: kept }),
      event("file.changed", { path: "crew.txt", before: null, after: kept }, "worker-1"),
      event("tool.started", { tool: "run_shell", params: { command: "npm install" } })
    ]
    const result = await Effect.runPromise(restoreFiles(events, store, ws))
    expect(result).toEqual({ restored: 2, missing: ["lost.txt"] })
    expect(fs.readFileSync(path.join(ws, "a/notes.txt"), "utf8")).toBe("two\n")
    expect(fs.existsSync(path.join(ws, "gone.txt"))).toBe(false)
    expect(fs.readFileSync(path.join(ws, "lost.txt"), "utf8")).toBe("base\n")
    expect(fs.existsSync(path.join(root, "outside.txt"))).toBe(false)
    expect(fs.existsSync(path.join(ws, "crew.txt"))).toBe(false)

    const note = takeoverNote(events, result.missing)!
    expect(note).toContain("1 shell command(s) ran before")
    expect(note).toContain("does not hold what the session's changes left in lost.txt: it is as the base commit has it")
    expect(takeoverNote(events.slice(0, 2))).toBeUndefined()
  })
})

describe("a session whose log the process that ran it before still holds", () => {
  it("is tried again after 1 s, then 2, 4, 8, 16, and at most every 30 s", () => {
    expect(Array.from({ length: 11 }, (_, i) => retryDelayMs(i))).toEqual([
      1000, 1000, 1000, 1000, 1000, 2000, 4000, 8000, 16000, 30000, 30000
    ])
    expect(retryDelayMs(10_000)).toBe(30000)
  })
})

describe("what a runner refuses", () => {
  it("never writes through a symbolic link the fresh clone holds where the session had a file", async () => {
    const store = EventLogFile.makeStore({ dir: path.join(root, "state-links") })
    const hash = await Effect.runPromise(
      Effect.scoped(Effect.flatMap(store.open("s", { create: true }), (log) => log.putBlob("owned\n", { exact: true })))
    )
    const ws = path.join(root, "ws-links")
    const outside = path.join(root, "outside-links")
    fs.mkdirSync(ws)
    fs.mkdirSync(outside)
    fs.writeFileSync(path.join(outside, "bashrc"), "mine\n")
    fs.writeFileSync(path.join(outside, "kept"), "mine\n")
    // the repository commits links where the session, after removing them, wrote files
    fs.symlinkSync(path.join(outside, "bashrc"), path.join(ws, "cfg"))
    fs.symlinkSync(outside, path.join(ws, "dir"))
    fs.writeFileSync(path.join(ws, "plain.txt"), "base\n")
    const events = [
      event("file.changed", { path: "cfg", before: null, after: hash }),
      event("file.changed", { path: "dir/new.txt", before: null, after: hash }),
      event("file.changed", { path: "dir/kept", before: hash, after: null }),
      event("file.changed", { path: "plain.txt", before: null, after: hash })
    ]
    const result = await Effect.runPromise(restoreFiles(events, store, ws))
    expect(result).toEqual({ restored: 1, missing: ["cfg", "dir/new.txt", "dir/kept"] })
    expect(fs.readFileSync(path.join(outside, "bashrc"), "utf8")).toBe("mine\n")
    expect(fs.existsSync(path.join(outside, "new.txt"))).toBe(false)
    expect(fs.readFileSync(path.join(outside, "kept"), "utf8")).toBe("mine\n")
    expect(fs.readFileSync(path.join(ws, "plain.txt"), "utf8")).toBe("owned\n")
  })

  it("a repository location that is an option is refused before git sees it", async () => {
    const marker = path.join(root, "injected")
    const exit = await Effect.runPromise(Effect.either(baseOf(`--upload-pack=touch ${marker};`)))
    expect(exit._tag).toBe("Left")
    expect(String(exit._tag === "Left" ? exit.left.message : "")).toContain("cannot start with '-'")
    expect(fs.existsSync(marker)).toBe(false)
  })

  it("a repository's commit is read by hardened git: a GIT_DIR around muse (a hook) does not redirect it, ext:: never runs", async () => {
    const init = (dir: string, text: string) => {
      fs.mkdirSync(dir)
      const g = (...args: Array<string>) => execFileSync("git", args, { cwd: dir, stdio: "ignore" })
      g("init", "-q")
      fs.writeFileSync(path.join(dir, "f.txt"), text)
      g("add", "-A")
      g("-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", text)
      return execFileSync("git", ["rev-parse", "HEAD"], { cwd: dir, encoding: "utf8" }).trim()
    }
    const mine = init(path.join(root, "base-mine"), "mine")
    const other = init(path.join(root, "base-other"), "other")
    const saved = process.env.GIT_DIR
    process.env.GIT_DIR = path.join(root, "base-other", ".git")
    try {
      expect(await Effect.runPromise(baseOf(path.join(root, "base-mine")))).toBe(mine)
    } finally {
      if (saved === undefined) delete process.env.GIT_DIR
      else process.env.GIT_DIR = saved
    }
    expect(await Effect.runPromise(baseOf(`file://${path.join(root, "base-other")}`))).toBe(other)
    const marker = path.join(root, "ext-ran")
    const ext = await Effect.runPromise(Effect.either(baseOf(`ext::sh -c touch% ${marker}`)))
    expect(ext._tag).toBe("Left")
    expect(fs.existsSync(marker)).toBe(false)
  })

  it("a Run message whose session id is not a plain name, names another entity, or whose base or repository is not one, is refused", () => {
    const job = { session: "20261202-a1", task: "t", repo: "/srv/app.git", base: "a".repeat(40), args: [] }
    expect(SessionCluster.jobProblem(job, job.session)).toBeUndefined()
    expect(SessionCluster.jobProblem({ ...job, session: "../../.." }, "../../..")).toContain("not a plain name")
    expect(SessionCluster.jobProblem({ ...job, session: "/etc" }, "/etc")).toContain("not a plain name")
    expect(SessionCluster.jobProblem(job, "20261202-other")).toContain("sent to entity")
    expect(SessionCluster.jobProblem({ ...job, base: "HEAD; rm -rf /" }, job.session)).toContain("not a commit id")
    expect(SessionCluster.jobProblem({ ...job, repo: "--upload-pack=sh" }, job.session)).toContain("not a location")
  })
})

describe("muse resume --notice (a runner's takeover note)", () => {
  beforeAll(() => ensureBuilt(), 240_000)

  it.each(["off", "workspace-write"])(
    "where the log is (MUSE_LOG) and a session's tie to its runner do not reach its commands (sandbox %s)",
    (mode) => {
      const sb = sandbox()
      const repo = buggyRepo(sb.root)
      const logDir = path.join(sb.root, "db-stand-in")
      const script = writeScript(sb, `env-${mode}`, {
        replies: [
          {
            when: "environment",
            steps: [
              { text: "Looking.", tools: [{ name: "run_shell", params: { command: "env > seen.txt" } }] },
              { text: "Done." }
            ]
          }
        ]
      })
      const r = muse(
        ["run", "print the environment", "--script", script, "--approval-mode", "auto", "--sandbox", mode],
        { sb: { ...sb, env: { ...sb.env, MUSE_LOG: logDir, MUSE_PROBE_VALUE: "kept" } }, cwd: repo }
      )
      expect(r.code, r.stderr).toBe(0)
      const seen = fs.readFileSync(path.join(repo, "seen.txt"), "utf8")
      // the session was kept where MUSE_LOG says, and the command saw the rest of the environment
      expect(fs.readdirSync(path.join(logDir, "sessions")).length).toBeGreaterThan(0)
      expect(seen).toContain("MUSE_PROBE_VALUE=kept")
      expect(seen).not.toContain("MUSE_LOG=")
      expect(seen).not.toContain("MUSE_EXIT_WITH_PARENT=")
    },
    120_000
  )

  it("reaches the agent as a notice from muse, recorded; the task goes on where it was; replay --verify passes", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const marks = path.join(sb.root, "marks.txt")
    const script = writeScript(sb, "moved", {
      replies: [
        {
          when: "append",
          steps: [
            {
              text: "Appending.",
              tools: [{ name: "run_shell", params: { command: `echo one >> ${marks}; sleep 20` } }]
            },
            { text: "Appending again.", tools: [{ name: "run_shell", params: { command: `echo two >> ${marks}` } }] },
            { text: "Finished." }
          ]
        }
      ]
    })
    const p = museAsync(
      [
        "run",
        "append the marks",
        "--script",
        script,
        "--approval-mode",
        "auto",
        "--sandbox",
        "off",
        "--output-format",
        "stream-json"
      ],
      { sb, cwd: repo }
    )
    const session = (await p.waitForLine((l) => l.kind === "session")).session
    await p.waitForLine((l) => l.kind === "event" && l.event.type === "tool.started")
    // the command is running: the machine goes away
    for (let i = 0; i < 100 && !fs.existsSync(marks); i++) await new Promise((r) => setTimeout(r, 50))
    p.child.kill("SIGKILL")
    await p.exited

    // another machine: a fresh clone, the session resumed there with the runner's note
    const clone = path.join(sb.root, "clone")
    execFileSync("git", ["clone", "--quiet", repo, clone])
    const note = takeoverNote(readLog(sb, session))!
    const r = muse(["resume", session, "--cwd", clone, "--notice", note, "--output-format", "json"], { sb, cwd: clone })
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ session, status: "completed", text: "Finished." })
    const events = readLog(sb, session)
    const delivered = events.filter((e) => e.type === "inbox.delivered")
    expect(delivered).toHaveLength(1)
    expect(delivered[0].data).toMatchObject({ from: "muse", text: `[muse] ${note}` })
    expect(note).toContain("1 shell command(s) ran before")
    // the interrupted command is not run again; the next one runs once
    expect(fs.readFileSync(marks, "utf8")).toBe("one\ntwo\n")
    const v = muse(["replay", session, "--verify"], { sb, cwd: clone })
    expect(v.stderr).toContain(`verified: ${events.length} of ${events.length} events replayed exactly`)
    expect(v.code).toBe(0)
  }, 120_000)
})
