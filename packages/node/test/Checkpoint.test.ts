/**
 * Checkpoints: a session resumed from its checkpoint goes on exactly as one that replays its whole
 * log (same events, same files), and a checkpoint that does not fit its log is ignored, with the
 * reason, never used.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { comparableEvents, inputs, routed, Scripted, scriptedModel } from "@musekit/core/testing"
import { CompactionPlugin } from "@musekit/plugin-compaction"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { EventLogFile, SessionRuntime } from "../src/index.js"

const LEAD = "You lead a small test crew."

/** Main writes a note and hands a part to a worker; the worker reports and writes; the reviewer approves. */
const model = () =>
  scriptedModel([
    routed({
      main: (c) => {
        const system = c.prompt.content[0]
        if (system?.role !== "system" || !system.content.startsWith(LEAD)) {
          return Scripted.text("## Goal\nwork through the tasks\n## Progress\nseveral tasks done")
        }
        const task = /^task (\d+)$/.exec(c.lastUser)?.[1]
        if (task !== undefined && c.lastResults.length === 0) {
          return Scripted.toolCalls([
            { id: `w${task}`, name: "write_file", params: { path: `notes/n${task}.md`, content: `note ${task}\n` } },
            { id: `d${task}`, name: "delegate", params: { to: "worker", task: `write part ${task}` } }
          ])
        }
        return Scripted.text(`noted after ${c.turn} replies: ${c.lastUser.slice(0, 40)}`)
      },
      worker: (c) => {
        const part = /write part (\d+)/.exec(c.lastUser)?.[1]
        if (part === undefined || c.lastResults.length > 0) return Scripted.text(`part ${part ?? "?"} done`)
        return Scripted.toolCalls([
          { id: `r${part}`, name: "report", params: { importance: "info", text: `starting part ${part}` } },
          { id: `p${part}`, name: "write_file", params: { path: `parts/p${part}.txt`, content: `part ${part}\n` } }
        ])
      },
      reviewer: (c) => {
        if (c.lastResults.length > 0) return Scripted.text("reviewed")
        const worker = /change by ([\w-]+) \(round/.exec(c.lastUser)?.[1] ?? "worker-1"
        return Scripted.toolCalls([
          { id: `v${c.turn}`, name: "verdict", params: { worker, verdict: "approve", critique: "fine" } }
        ])
      }
    })
  ]).layer

const services = (): SessionRuntime.Services => ({
  languageModel: model(),
  // a small window, so the main agent's context is compacted along the way
  plugins: [CompactionPlugin.make({ contextWindow: 1_500 })]
})

const tasks = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `task ${from + i}`)

const io = (texts: ReadonlyArray<string>, resumed?: Array<SessionRuntime.ResumeInfo>): SessionRuntime.Io => ({
  input: inputs(texts),
  prompter: { ask: () => Effect.succeed({ allow: true, scope: "once" as const }) },
  onResume: (info) => Effect.sync(() => void resumed?.push(info))
})

/** Events as replay compares them: no times, no observations. */
const comparable = comparableEvents

const files = (root: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name)
      if (entry.isDirectory()) walk(p)
      else out[path.relative(root, p)] = fs.readFileSync(p, "utf8")
    }
  }
  walk(root)
  return out
}

const read = (dir: string, session: string) => Effect.runPromise(EventLogFile.readSession(session, { dir }))

describe("checkpoints", () => {
  it("a session resumed from its checkpoint goes on exactly as one that replays its whole log", async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "muse-cp-"))
    const root = path.join(base, "root")
    const dir = path.join(base, "state")
    fs.mkdirSync(root)
    const config = SessionRuntime.config({ root, model: "scripted/cp", approvalMode: "auto", instructions: LEAD })
    await Effect.runPromise(
      SessionRuntime.start({
        config,
        session: "s",
        dir,
        io: io(tasks(1, 5)),
        services: services(),
        checkpointEvery: 25
      })
    )
    // one more task without checkpoints, so the log goes on past the latest one
    await Effect.runPromise(
      SessionRuntime.resume({ session: "s", dir, io: io(tasks(6, 6)), services: services(), checkpointEvery: 0 })
    )
    const first = await read(dir, "s")
    const saved = EventLogFile.readCheckpoint(dir, "s")
    if (saved._tag === "Left") throw new Error(`no checkpoint: ${saved.left}`)
    const cp = saved.right
    expect(cp.seq).toBeGreaterThan(100)
    expect(cp.seq).toBeLessThan(first.length - 1)
    const state = cp.state as SessionRuntime.State
    // the state holds the crew with its conversations and the compacted main agent
    expect(state.crew?.members.map((m) => m.name)).toEqual(["worker-1", "reviewer-1", "worker-2"])
    expect(state.crew?.members[0]?.agent?.history.length).toBeGreaterThan(4)
    expect(Object.keys(state.plugins)).toEqual(["compaction"])
    expect((state.plugins.compaction as Record<string, number>).main).toBeGreaterThan(0)

    // two copies of the state and workspace: one resumes from the checkpoint, one from the whole log
    fs.cpSync(dir, path.join(base, "state-full"), { recursive: true })
    fs.cpSync(root, path.join(base, "root-start"), { recursive: true })
    const resumed: Array<SessionRuntime.ResumeInfo> = []
    await Effect.runPromise(
      SessionRuntime.resume({
        session: "s",
        dir,
        io: io(tasks(7, 9), resumed),
        services: services(),
        checkpointEvery: 25
      })
    )
    const viaCheckpoint = await read(dir, "s")
    const filesViaCheckpoint = files(root)
    fs.rmSync(root, { recursive: true })
    fs.cpSync(path.join(base, "root-start"), root, { recursive: true })
    await Effect.runPromise(
      SessionRuntime.resume({
        session: "s",
        dir: path.join(base, "state-full"),
        io: io(tasks(7, 9), resumed),
        services: services(),
        useCheckpoint: false,
        checkpointEvery: 0
      })
    )
    const viaLog = await read(path.join(base, "state-full"), "s")

    expect(resumed[0]).toEqual({
      nextSeq: first.length,
      checkpoint: cp.seq,
      replaying: first.length - 1 - cp.seq,
      ignored: null
    })
    expect(resumed[1]).toEqual({ nextSeq: first.length, checkpoint: null, replaying: first.length, ignored: null })
    expect(viaCheckpoint.length).toBeGreaterThan(first.length + 40)
    expect(comparable(viaCheckpoint)).toEqual(comparable(viaLog))
    expect(files(root)).toEqual(filesViaCheckpoint)
    expect(Object.keys(filesViaCheckpoint)).toContain("parts/p9.txt")
    // compaction went on in the continued part, numbered on from the restored count
    const compactions = viaCheckpoint.filter((e) => e.type === "context.compacted" && e.agent === "main")
    expect(compactions.filter((e) => e.seq > cp.seq).length).toBeGreaterThan(0)
    // a later checkpoint was taken, and the whole log still replays exactly from the start
    const later = EventLogFile.readCheckpoint(dir, "s")
    expect(later._tag === "Right" && later.right.seq > cp.seq).toBe(true)
    const report = await Effect.runPromise(
      SessionRuntime.replay({ session: "s", dir, verify: true, plugins: services().plugins })
    )
    expect(report.matched).toBe(viaCheckpoint.length)
  }, 60_000)

  it("a secret in tool output reaches neither the log nor the checkpoint, and the session replays and resumes exactly", async () => {
    const secret = 'pk-"quoted"-second-part-0123456789'
    process.env.MUSE_TEST_PRIVATE_KEY = secret
    try {
      const base = fs.mkdtempSync(path.join(os.tmpdir(), "muse-cp-secret-"))
      const root = path.join(base, "root")
      const dir = path.join(base, "state")
      fs.mkdirSync(root)
      fs.writeFileSync(path.join(root, ".env"), `KEY=${secret}\n`)
      const secretModel = () =>
        scriptedModel([
          routed({
            main: (c) =>
              c.lastResults.length > 0
                ? Scripted.text(`read it (${c.turn})`)
                : Scripted.toolCalls([{ id: `r${c.turn}`, name: "read_file", params: { path: ".env" } }])
          })
        ]).layer
      const config = SessionRuntime.config({ root, model: "scripted/cp", approvalMode: "auto", crew: false })
      const run = (texts: ReadonlyArray<string>, resumed?: Array<SessionRuntime.ResumeInfo>) =>
        Effect.runPromise(
          SessionRuntime.resume({
            session: "s",
            dir,
            io: io(texts, resumed),
            services: { languageModel: secretModel() },
            checkpointEvery: 1
          })
        )
      await Effect.runPromise(
        SessionRuntime.start({
          config,
          session: "s",
          dir,
          io: io(["read the env file"]),
          services: { languageModel: secretModel() },
          checkpointEvery: 1
        })
      )
      const resumed: Array<SessionRuntime.ResumeInfo> = []
      await run(["read it again"], resumed)
      expect(resumed[0]?.checkpoint).not.toBeNull()
      const logText = fs.readFileSync(path.join(dir, "sessions", "s.jsonl"), "utf8")
      const checkpointText = fs.readFileSync(EventLogFile.checkpointFile(dir, "s"), "utf8")
      for (const text of [logText, checkpointText]) {
        expect(text).not.toContain("second-part-0123456789")
        expect(text).toContain("[REDACTED:MUSE_TEST_PRIVATE_KEY]")
      }
      const report = await Effect.runPromise(SessionRuntime.replay({ session: "s", dir, verify: true }))
      expect(report.matched).toBe((await read(dir, "s")).length)
    } finally {
      delete process.env.MUSE_TEST_PRIVATE_KEY
    }
  }, 60_000)

  it("a checkpoint that does not fit its log is ignored with the reason, and resume replays the whole log", async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "muse-cp-bad-"))
    const root = path.join(base, "root")
    const dir = path.join(base, "state")
    fs.mkdirSync(root)
    const config = SessionRuntime.config({ root, model: "scripted/cp", approvalMode: "auto", instructions: LEAD })
    for (const session of ["a", "b"]) {
      await Effect.runPromise(
        SessionRuntime.start({ config, session, dir, io: io(tasks(1, 2)), services: services(), checkpointEvery: 10 })
      )
    }
    const file = EventLogFile.checkpointFile(dir, "a")
    const good = fs.readFileSync(file, "utf8")
    const cases: Array<[string, string, string]> = [
      ["torn", good.slice(0, good.length >> 1), "not JSON"],
      ["another session's", fs.readFileSync(EventLogFile.checkpointFile(dir, "b"), "utf8"), "belongs to session b"],
      ["another log's", good.replace(/"check":"[0-9a-f]+"/, '"check":"00000000000000"'), "another event at seq"],
      ["ahead of the log", good.replace(/"seq":\d+/, '"seq":999999'), "the log ends at"],
      ["older format", good.replace('"version":1', '"version":0'), "format version 0"],
      ["incomplete", good.replace('"approvals":{', '"approvals":null,"was":{'), "its state is incomplete"],
      [
        "unrestorable",
        good.replaceAll('"role":"worker"', '"role":"gardener"'),
        "cannot be restored: a checkpoint names crew role gardener"
      ]
    ]
    const events = await read(dir, "a")
    for (const [what, text, reason] of cases) {
      fs.writeFileSync(file, text)
      const resumed: Array<SessionRuntime.ResumeInfo> = []
      await Effect.runPromise(
        SessionRuntime.resume({ session: "a", dir, io: io([], resumed), services: services(), checkpointEvery: 0 })
      )
      expect(resumed, what).toEqual([
        { nextSeq: events.length, checkpoint: null, replaying: events.length, ignored: expect.stringContaining(reason) }
      ])
      // nothing was appended: the session was complete, and replaying it changed nothing
      expect((await read(dir, "a")).length, what).toBe(events.length)
    }
  }, 60_000)
})
