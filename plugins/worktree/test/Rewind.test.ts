/**
 * Rewind and fork over real files and real git: a session of writes and edits across 20 files in
 * the checkout and three crew members' worktrees, rewound to five points and compared byte for byte
 * with copies of every workspace taken at those points during the live run; a person's edit after
 * the target is found and kept; a rewind is undone; a fork continues on its own and both logs
 * replay exactly.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { routed, Scripted, scriptedModel } from "@musekit/core/testing"
import { CodingTools, EventLogFile, SessionRuntime } from "@musekit/node"
import { Effect, Option } from "effect"
import { describe, expect, it } from "vitest"
import * as WorktreePlugin from "../src/WorktreePlugin.js"

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], {
    cwd,
    encoding: "utf8"
  })

const WORKERS = ["worker-1", "worker-2", "worker-3"]
const pad = (n: number) => String(n).padStart(2, "0")

/** What main does in round `r`: writes and edits of the checkout's files, and a task for each worker. */
const mainCalls = (r: number) => [
  { id: `w${r}a`, name: "write_file", params: { path: `f${pad(r * 2 - 1)}.txt`, content: `round ${r} wrote this\n` } },
  {
    id: `w${r}b`,
    name: "edit_file",
    params: { path: `f${pad(r * 2)}.txt`, old: `file ${r * 2}\n`, new: `file ${r * 2} edited in round ${r}\n` }
  },
  {
    id: `w${r}c`,
    name: "write_file",
    params: { path: `f${pad(10 + r)}.txt`, content: `round ${r}: ${"x".repeat(r * 100)}\n` }
  },
  { id: `w${r}d`, name: "write_file", params: { path: `new/round${r}.txt`, content: `new in round ${r}\n` } },
  ...(r === 1
    ? []
    : [{ id: `w${r}e`, name: "write_file", params: { path: "f20.txt", content: `f20 at round ${r}\n` } }]),
  ...(r === 3 ? [{ id: "sh3", name: "run_shell", params: { command: "echo side > shell.txt" } }] : []),
  ...WORKERS.map((w, i) => ({ id: `d${r}${i}`, name: "delegate", params: { to: w, task: `${w} round ${r}` } }))
]

const model = () =>
  scriptedModel([
    routed({
      main: (c) => {
        const r = /^round (\d+)$/.exec(c.lastUser)?.[1]
        if (r !== undefined && c.lastResults.length === 0) return Scripted.toolCalls(mainCalls(Number(r)))
        return Scripted.text(`noted: ${c.lastUser.slice(0, 20)}`)
      },
      worker: (c) => {
        const m = /(worker-\d) round (\d+)/.exec(c.lastUser)
        if (!m || c.lastResults.length > 0) return Scripted.text("done")
        const [, w, r] = m
        return Scripted.toolCalls([
          { id: `${w}-${r}a`, name: "write_file", params: { path: `${w}.txt`, content: `${w} round ${r}\n` } },
          {
            id: `${w}-${r}b`,
            name: "write_file",
            params: { path: `f${pad(15 + Number(r))}.txt`, content: `${w} ${r}\n` }
          }
        ])
      },
      reviewer: (c) => {
        const w = /worker-\d/.exec(c.lastUser)?.[0] ?? "worker-1"
        return c.lastResults.length > 0
          ? Scripted.text("approved")
          : Scripted.toolCalls([
              { id: `v${c.turn}`, name: "verdict", params: { worker: w, verdict: "approve", critique: "ok" } }
            ])
      }
    })
  ])

/** Every file under `dir` (not `.git`), by relative path. */
const snapshot = (dir: string): Map<string, string> => {
  const out = new Map<string, string>()
  if (!fs.existsSync(dir)) return out
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      if (entry.name === ".git") continue
      const abs = path.join(d, entry.name)
      if (entry.isDirectory()) walk(abs)
      else out.set(path.relative(dir, abs), createHash("sha256").update(fs.readFileSync(abs)).digest("hex"))
    }
  }
  walk(dir)
  return out
}

const sorted = (m: Map<string, string>, drop: ReadonlyArray<string> = []) =>
  [...m].filter(([k]) => !drop.includes(k)).sort(([a], [b]) => (a < b ? -1 : 1))

describe("rewind and fork", () => {
  it("puts 20 files in the checkout and 3 worktrees back to 5 points, keeps a person's edit, undoes, forks", async () => {
    const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-rewind-")))
    const repo = path.join(base, "repo")
    const dir = path.join(base, "state")
    const wtRoot = path.join(base, "worktrees")
    fs.mkdirSync(repo)
    for (let i = 1; i <= 20; i++) fs.writeFileSync(path.join(repo, `f${pad(i)}.txt`), `file ${i}\n`)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    const session = "s"
    const worktreeOf = (w: string) => path.join(wtRoot, session, w)
    const scripted = model()
    const services = (repoDir = repo, id = session, m = scripted): SessionRuntime.Services => ({
      languageModel: m.layer,
      tools: CodingTools.make({ grepEngine: "js" }),
      plugins: [WorktreePlugin.make({ repo: repoDir, sessionId: id, root: wtRoot })]
    })
    const prompter = { ask: () => Effect.succeed({ allow: true, scope: "once" as const }) }
    // copies of every workspace at each idle point of the live run, before each input is taken
    const copies: Array<{ main: Map<string, string>; workers: Record<string, Map<string, string>> }> = []
    const take = () =>
      copies.push({
        main: snapshot(repo),
        workers: Object.fromEntries(WORKERS.map((w) => [w, snapshot(worktreeOf(w))]))
      })
    const rounds = ["round 1", "round 2", "round 3", "round 4", "round 5"]
    const queue = [...rounds]
    const config = SessionRuntime.config({
      root: repo,
      model: "scripted/rewind",
      approvalMode: "auto",
      instructions: "Lead.",
      plugins: ["worktree"]
    })
    await Effect.runPromise(
      SessionRuntime.start({
        config,
        session,
        dir,
        services: services(),
        io: {
          prompter,
          input: Effect.sync(() => {
            take()
            return queue.length > 0 ? Option.some(queue.shift()!) : Option.none()
          })
        }
      })
    )
    expect(copies).toHaveLength(6)
    // the session touched all 20 files of the checkout or new ones, and each worker's worktree
    const touched = new Set<string>()
    const live = await Effect.runPromise(EventLogFile.readSession(session, { dir }))
    for (const e of live) if (e.type === "file.changed") touched.add(`${e.agent}:${(e.data as any).path}`)
    expect(touched.size).toBeGreaterThanOrEqual(20)
    for (const w of WORKERS) {
      expect(fs.readFileSync(path.join(worktreeOf(w), `${w}.txt`), "utf8")).toBe(`${w} round 5\n`)
    }

    const compare = (k: number, label: string) => {
      const copy = copies[k]!
      expect(sorted(snapshot(repo), ["shell.txt"]), label).toEqual(sorted(copy.main, ["shell.txt"]))
      for (const w of WORKERS) {
        // before its first task a member had no worktree to copy
        if (copy.workers[w]!.size > 0)
          expect(sorted(snapshot(worktreeOf(w))), `${label} ${w}`).toEqual(sorted(copy.workers[w]!))
      }
    }
    const rewinding = (to: string, force = false) =>
      SessionRuntime.rewind({ session, dir, to, force, services: services() })
    const rewind = (to: string, force = false) => Effect.runPromise(rewinding(to, force))

    // rewind-then-undo returns to the latest state
    await rewind("turn:2")
    compare(1, "turn:2")
    await rewind("undo")
    compare(5, "undo to the latest state")

    // five points, back and forth
    for (const k of [3, 1, 4, 2, 0]) {
      const done = await rewind(`turn:${k + 1}`)
      expect(done.result.kept).toEqual([])
      expect(done.result.failed).toEqual([])
      compare(k, `turn:${k + 1}`)
    }
    // the shell command is named as not undone, and its file stays
    const fromStart = await Effect.runPromise(SessionRuntime.rewindPlan({ session, dir, to: "turn:3" }))
    expect(fromStart.plan.notUndone.map((n) => n.tool)).toContain("run_shell")
    expect(fs.existsSync(path.join(repo, "shell.txt"))).toBe(true)

    // undo takes the latest rewind (to turn:1) back: the files are as they were at turn:3 again
    await rewind("undo")
    compare(2, "undo")

    // a person edits a file after the target: found by its hash, kept, nothing recorded
    fs.writeFileSync(path.join(repo, "f01.txt"), "my own edit\n")
    const before = fs.readFileSync(path.join(dir, "sessions", `${session}.jsonl`))
    const refused = await Effect.runPromise(Effect.flip(rewinding("turn:1")))
    expect(refused._tag).toBe("RewindRefused")
    expect((refused as SessionRuntime.RewindRefused).files).toEqual(["f01.txt"])
    expect(fs.readFileSync(path.join(repo, "f01.txt"), "utf8")).toBe("my own edit\n")
    expect(fs.readFileSync(path.join(dir, "sessions", `${session}.jsonl`))).toEqual(before)
    // forced, it is put back, and its content stays in the log (the rewind can be undone)
    const forced = await rewind("turn:1", true)
    expect(forced.result.restored.some((f) => f.path === "f01.txt")).toBe(true)
    compare(0, "forced")
    await rewind("undo")
    expect(fs.readFileSync(path.join(repo, "f01.txt"), "utf8")).toBe("my own edit\n")
    fs.writeFileSync(path.join(repo, "f01.txt"), "round 1 wrote this\n")

    // the conversation goes on from the point: rewound to before round 4, the next prompt has no round 4
    await rewind("turn:4")
    const prompts = scripted.prompts.length
    await Effect.runPromise(
      SessionRuntime.resume({
        session,
        dir,
        services: services(),
        io: { prompter, input: queueOf(["round 6 after the rewind"]) }
      })
    )
    const next = scripted.prompts.slice(prompts).find((p) => JSON.stringify(p).includes("round 6 after"))
    expect(JSON.stringify(next)).toContain("round 3")
    expect(JSON.stringify(next)).not.toContain("round 4")

    // a fork at turn 3 goes on in a worktree of its own; the parent's log is not changed
    const parentLog = fs.readFileSync(path.join(dir, "sessions", `${session}.jsonl`))
    const forked = await Effect.runPromise(SessionRuntime.fork({ session, dir, at: "turn:3", id: "f" }))
    expect(fs.readFileSync(path.join(dir, "sessions", `${session}.jsonl`))).toEqual(parentLog)
    expect(forked.worktree).toBe(true)
    expect(path.relative(repo, forked.root).startsWith("..")).toBe(true)
    expect(sorted(snapshot(forked.root), ["shell.txt"])).toEqual(sorted(copies[2]!.main, ["shell.txt"]))
    const forkEvents = await Effect.runPromise(EventLogFile.readSession("f", { dir }))
    expect((forkEvents[0]!.data as any).config.fork).toEqual({ session, seq: forked.target.seq })
    // its crew members have worktrees of their own, with their files as they were at that point
    const forkAllocations = forkEvents
      .filter((e) => e.type === "worktree.allocated")
      .map((e) => (e.data as any).allocation.path as string)
    expect(forkAllocations).toHaveLength(3)
    for (const p of forkAllocations) {
      expect(p.startsWith(wtRoot)).toBe(false)
      const w = path.basename(p)
      expect(sorted(snapshot(p))).toEqual(sorted(copies[2]!.workers[w]!))
    }

    // it goes on by itself: its next round lands in its own checkout, not the parent's
    await Effect.runPromise(
      SessionRuntime.resume({
        session: "f",
        dir,
        services: services(forked.root, "f", model()),
        io: { prompter, input: queueOf(["round 5"]) }
      })
    )
    expect(fs.readFileSync(path.join(forked.root, "f20.txt"), "utf8")).toBe("f20 at round 5\n")
    expect(fs.readFileSync(path.join(repo, "f20.txt"), "utf8")).toBe("f20 at round 3\n")

    // both replay exactly
    for (const [id, repoDir] of [
      [session, repo],
      ["f", forked.root]
    ] as const) {
      const events = await Effect.runPromise(EventLogFile.readSession(id, { dir }))
      const report = await Effect.runPromise(
        SessionRuntime.replay({
          session: id,
          dir,
          verify: true,
          tools: CodingTools.make({ grepEngine: "js" }),
          plugins: [WorktreePlugin.make({ repo: repoDir, sessionId: id, replaying: true })]
        })
      )
      expect(report.matched, id).toBe(events.length)
    }
  }, 240_000)
})

const queueOf = (texts: ReadonlyArray<string>) => {
  const q = [...texts]
  return Effect.sync(() => (q.length > 0 ? Option.some(q.shift()!) : Option.none()))
}
