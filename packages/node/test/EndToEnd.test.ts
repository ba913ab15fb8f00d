import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as zlib from "node:zlib"
import type { LanguageModel } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Agent, EventLog, Model, Session } from "@musekit/core"
import { autoPrompter, layerAgentServices, routed, Scripted, scriptedModel } from "@musekit/core/testing"
import { Effect, Layer } from "effect"
import { CodingTools, EventLogFile, WorkspaceNode } from "../src/index.js"

/** A real git repository whose unit test fails until `sum.js` is fixed. */
export const makeBuggyRepo = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-e2e-"))
  fs.writeFileSync(
    path.join(dir, "package.json"),
    JSON.stringify({ name: "demo", private: true, type: "module", scripts: { test: "node --test" } }, null, 2)
  )
  fs.writeFileSync(path.join(dir, "sum.js"), "export const sum = (a, b) => a - b\n")
  fs.writeFileSync(
    path.join(dir, "sum.test.js"),
    'import { test } from "node:test"\nimport assert from "node:assert"\nimport { sum } from "./sum.js"\n\ntest("adds", () => assert.strictEqual(sum(2, 3), 5))\n'
  )
  const git = (...args: Array<string>) =>
    execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], { cwd: dir })
  git("init", "-q", "-b", "main")
  git("add", ".")
  git("commit", "-q", "-m", "buggy sum")
  return dir
}

/** The model a developer would hope for: read, fix, run the tests, look at the result, stop. */
export const fixerScript = routed({
  main: (c) => {
    const last = c.lastResults[0]
    if (c.turn === 0) return Scripted.toolCalls([{ name: "read_file", params: { path: "sum.js" } }])
    if (c.turn === 1) {
      return Scripted.toolCalls([
        { name: "edit_file", params: { path: "sum.js", edits: [{ old_text: "a - b", new_text: "a + b" }] } }
      ])
    }
    if (c.turn === 2) return Scripted.toolCalls([{ name: "run_shell", params: { command: "npm test" } }])
    const exit = (last?.result as any)?.exit_code
    return Scripted.text(exit === 0 ? "Fixed: sum now adds, and npm test passes." : `Tests still fail (exit ${exit}).`)
  }
})

describe("end to end on a real repository", () => {
  it.live("the agent reads, edits, runs the failing test, sees it pass and stops; the log holds every step", () =>
    Effect.gen(function* () {
      const repo = makeBuggyRepo()
      const state = fs.mkdtempSync(path.join(os.tmpdir(), "muse-state-"))
      const prompter = autoPrompter({ allow: true, scope: "once" })
      const makeProgram = (languageModel: Layer.Layer<LanguageModel.LanguageModel>) =>
        Effect.gen(function* () {
          const agent = yield* Agent.make({ name: "main", instructions: "You fix bugs." })
          return yield* agent.send("The unit test fails. Fix it.")
        }).pipe(
          Effect.provide(
            layerAgentServices({
              languageModel,
              tools: CodingTools.make(),
              workspace: WorkspaceNode.layer(repo).pipe(Layer.orDie),
              approvals: { mode: "auto-edit" },
              prompter: prompter.layer
            })
          )
        )
      const result = yield* Session.run(makeProgram(scriptedModel([fixerScript]).layer)).pipe(
        Effect.provide(EventLogFile.layer({ dir: state, session: "e2e", create: true }))
      )
      expect(result.status).toBe("completed")
      expect(result.text).toBe("Fixed: sum now adds, and npm test passes.")
      expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a + b\n")
      // the test really passes now
      execFileSync("npm", ["test"], { cwd: repo, stdio: "pipe" })
      // run_shell asked the person (auto-edit mode), edits did not
      expect(prompter.asked.map((r) => [r.tool, r.summary])).toEqual([["run_shell", "npm test"]])

      const events = yield* EventLogFile.readSession("e2e", { dir: state })
      const story = events
        .filter(
          (e) => e.type !== "approval.decided" && e.type !== "approval.requested" && e.type !== "approval.answered"
        )
        .map((e) => (e.type.startsWith("tool.") ? `${e.type}:${(e.data as any).tool}` : e.type))
      expect(story).toEqual([
        "user.message",
        "prompt.ready",
        "model.requested",
        "model.responded",
        "tool.started:read_file",
        "tool.completed:read_file",
        "model.requested",
        "model.responded",
        "tool.started:edit_file",
        "tool.completed:edit_file",
        "file.changed",
        "model.requested",
        "model.responded",
        "tool.started:run_shell",
        "tool.completed:run_shell",
        "model.requested",
        "model.responded",
        "turn.completed"
      ])
      const approvals = events.filter((e) => e.type.startsWith("approval."))
      expect(approvals.map((e) => `${e.type}:${(e.data as any).tool ?? ""}`)).toEqual([
        "approval.decided:read_file",
        "approval.decided:edit_file",
        "approval.requested:run_shell",
        "approval.answered:",
        "approval.decided:run_shell"
      ])
      const changed = events.find((e) => e.type === "file.changed")!.data as any
      expect(changed.path).toBe("sum.js")
      expect(changed.before).toMatch(/^[0-9a-f]{64}$/)
      expect(changed.after).toMatch(/^[0-9a-f]{64}$/)
      expect(changed.before).not.toBe(changed.after)
      // the log holds both file states it names: a workspace can be rebuilt from it elsewhere
      const blob = (hash: string) => fs.readFileSync(path.join(state, "blobs", hash.slice(0, 2), hash), "utf8")
      expect(blob(changed.before)).toBe("export const sum = (a, b) => a - b\n")
      expect(blob(changed.after)).toBe("export const sum = (a, b) => a + b\n")
      const edit = events.find((e) => e.type === "tool.started" && (e.data as any).tool === "edit_file")!
      expect((edit.data as any).observed.fingerprint["sum.js"]).toBe(changed.before)
      const shell = events.find((e) => e.type === "tool.completed" && (e.data as any).tool === "run_shell")!
      expect((shell.data as any).result.exit_code).toBe(0)
      expect(fs.statSync(path.join(state, "sessions", "e2e.jsonl")).mode & 0o777).toBe(0o600)

      // docs/event-format.md, followed to the letter on every line of this real log: strip the last
      // 18 bytes, append "}", and compare the CRC-32 of those bytes with the 8 hex digits
      const raw = fs.readFileSync(path.join(state, "sessions", "e2e.jsonl"))
      const lines: Array<Buffer> = []
      for (let at = 0; at < raw.length; ) {
        const nl = raw.indexOf(10, at)
        lines.push(raw.subarray(at, nl))
        at = nl + 1
      }
      expect(lines.length).toBe(events.length)
      for (const line of lines) {
        const suffix = line.subarray(line.length - 18).toString("latin1")
        expect(suffix).toMatch(/^,"crc":"[0-9a-f]{8}"\}$/)
        const body = Buffer.concat([line.subarray(0, line.length - 18), Buffer.from("}")])
        expect(zlib.crc32(body).toString(16).padStart(8, "0")).toBe(suffix.slice(8, 16))
        expect(JSON.parse(body.toString("utf8")).seq).toBe(JSON.parse(line.toString("utf8")).seq)
      }

      // the recorded session replays exactly, without touching the repository
      const before = fs.readFileSync(path.join(repo, "sum.js"), "utf8")
      fs.writeFileSync(path.join(repo, "sum.js"), "export const sum = (a, b) => a - b\n")
      const report = yield* Session.replay(makeProgram(Model.layerLanguageModelForbidden), { events, verify: true })
      expect(report.matched).toBe(events.length)
      expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a - b\n")
      expect(before).not.toBe("")
    })
  )
})

describe("what a read-only turn costs the file log", () => {
  /** One user turn over the file log: `reads` model steps that each call read_file, then an answer. */
  const syncsOf = (reads: number) =>
    Effect.gen(function* () {
      const repo = fs.mkdtempSync(path.join(os.tmpdir(), "muse-syncs-"))
      fs.writeFileSync(path.join(repo, "a.txt"), "alpha\n")
      const state = fs.mkdtempSync(path.join(os.tmpdir(), "muse-state-"))
      const script = [
        ...Array.from({ length: reads }, (_, i) =>
          Scripted.toolCalls([{ id: `r${i}`, name: "read_file", params: { path: "a.txt" } }])
        ),
        Scripted.text("read")
      ]
      return yield* Effect.gen(function* () {
        const log = yield* EventLog.EventLog
        const agent = yield* Agent.make({ name: "main", instructions: "You read." })
        const before = yield* log.commits
        const result = yield* agent.send("read a.txt")
        expect(result.status).toBe("completed")
        expect(result.toolCalls).toBe(reads)
        // (what the turn left enqueued is written by the next turn's first sync, or when the log closes)
        return (yield* log.commits) - before
      }).pipe(
        Effect.provide(
          layerAgentServices({
            script,
            tools: CodingTools.make(),
            workspace: WorkspaceNode.layer(repo).pipe(Layer.orDie),
            approvals: { mode: "auto-edit" }
          })
        ),
        Session.run,
        // no lazy write on a timer: every sync counted is one the turn asked for
        Effect.provide(EventLogFile.layer({ dir: state, session: "syncs", create: true, lazyCommitMs: 600_000 }))
      )
    })

  it.live("each model step that calls a read tool costs one fdatasync (its model request's), not one per event", () =>
    Effect.gen(function* () {
      const one = yield* syncsOf(1)
      const six = yield* syncsOf(6)
      // five more read steps, five more syncs: the read's tool.started and tool.completed ride along
      // with the next model.requested
      expect(six - one).toBe(5)
      // and the turn around them: the user's message (an intent: its prompt may come from a hook),
      // the first model request, the one step's, and the turn's end
      expect(one).toBe(4)
    })
  )
})
