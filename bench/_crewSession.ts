/**
 * A synthetic day-long crew session, written as a real session log (checksummed JSONL lines) in a
 * state directory, for the benchmarks of `muse view`: a main agent, three workers and a reviewer
 * working over 24 hours — model calls with prompt excerpts, reads, edits with diffs, shell
 * commands with output, approvals, reports and their delivery, reviews, merges, compactions.
 * The mix is that of the recorded crew sessions (about five events per tool call).
 *
 * @example
 * ```ts
 * const { session, bytes } = writeCrewSession(stateDir, 60_000)
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Event } from "../packages/core/src/index.js"
import { EventLogFile } from "../packages/node/src/index.js"

/** A small deterministic generator (the same session every run). */
const rng = (seed: number) => () => {
  seed = (seed * 1664525 + 1013904223) >>> 0
  return seed / 2 ** 32
}

const words = "the build test file change error module import export function return value type config path".split(" ")

export const writeCrewSession = (
  stateDir: string,
  target: number,
  session = `bench-crew-${target}`
): { readonly session: string; readonly bytes: number; readonly events: number } => {
  const rand = rng(target)
  const pick = <T>(xs: ReadonlyArray<T>): T => xs[Math.floor(rand() * xs.length)]!
  const text = (n: number) => Array.from({ length: n }, () => pick(words)).join(" ")
  const dir = path.join(stateDir, "sessions")
  fs.mkdirSync(dir, { recursive: true })
  const lines: Array<string> = []
  let seq = 0
  let at = Date.UTC(2026, 11, 1, 8, 0, 0)
  // a tool step is about six events: spread the steps over the day
  const step = () => (24 * 3600_000) / (target / 6)
  const add = (agent: string, type: string, data: unknown, parent: string | null = null): string => {
    const e: Event.Envelope = { v: 1, seq, id: Event.idFor(seq), at: Math.round(at), agent, parent, type, data }
    lines.push(EventLogFile.withChecksum(Event.encodeLine(e)))
    seq++
    return e.id
  }
  const model = "anthropic/claude-sonnet-4-5"
  add("main", "session.started", {
    title: "a day of crew work",
    config: { title: "a day of crew work", root: "/work/app", model, crew: true }
  })
  add("main", "user.input", { text: "keep the test suite green and finish the migration" })
  const members = ["worker-1", "worker-2", "worker-3"]
  for (const m of [...members, "reviewer-1"]) add(m, "crew.spawned", { role: m.replace(/-\d+$/, ""), workspace: null })
  let call = 0
  let context = new Map<string, number>()
  const toolStep = (agent: string) => {
    const c = `call_${++call}`
    const ctx = (context.get(agent) ?? 4000) + 600 + Math.floor(rand() * 900)
    context.set(agent, ctx)
    const req = add(agent, "model.requested", {
      model,
      messages: 12,
      keep: 10,
      appended: [
        { role: "assistant", content: [{ type: "text", text: text(30) }] },
        { role: "tool", content: [{ type: "tool-result", id: c, name: "read_file", result: { content: text(120) } }] }
      ]
    })
    at += step() * (0.5 + rand())
    const tool = pick(["read_file", "read_file", "edit_file", "run_shell", "grep"])
    const file = `src/${pick(words)}/${pick(words)}.ts`
    const params =
      tool === "run_shell"
        ? { command: `npm test -- ${file}` }
        : tool === "grep"
          ? { pattern: pick(words) }
          : { path: file }
    add(
      agent,
      "model.responded",
      {
        model,
        text: text(20),
        toolCalls: [{ id: c, name: tool, params }],
        finishReason: "tool-calls",
        usage: {
          inputTokens: ctx,
          outputTokens: 80 + Math.floor(rand() * 300),
          cachedInputTokens: Math.floor(ctx * 0.8)
        }
      },
      req
    )
    if (rand() < 0.02) {
      const q = add(agent, "approval.requested", { callId: c, tool, summary: JSON.stringify(params) })
      at += step() * 4 * rand()
      add(agent, "approval.answered", { callId: c, allow: true, scope: "once" }, q)
    } else
      add(agent, "approval.decided", {
        callId: c,
        tool,
        summary: JSON.stringify(params),
        allow: true,
        by: "mode",
        mode: "auto-edit"
      })
    const started = add(agent, "tool.started", {
      callId: c,
      tool,
      effect: tool === "edit_file" ? "write" : tool === "run_shell" ? "exec" : "read",
      summary: `${tool} ${JSON.stringify(params)}`,
      params
    })
    at += step() * (tool === "run_shell" ? 3 * rand() : 0.2 * rand())
    const result =
      tool === "edit_file"
        ? {
            path: file,
            diff: `--- a/${file}\n+++ b/${file}\n@@ -10,3 +10,3 @@\n ${text(8)}\n-${text(10)}\n+${text(10)}\n ${text(8)}\n`,
            added: 1,
            removed: 1
          }
        : tool === "run_shell"
          ? {
              exit_code: rand() < 0.2 ? 1 : 0,
              output: Array.from({ length: 20 }, () => text(12)).join("\n"),
              timed_out: false
            }
          : tool === "grep"
            ? { matches: Array.from({ length: 8 }, () => ({ path: file, line: 3, text: text(8) })) }
            : { path: file, content: Array.from({ length: 40 }, () => text(10)).join("\n"), total_lines: 40 }
    add(agent, "tool.completed", { callId: c, tool, isFailure: false, result }, started)
    if (tool === "edit_file")
      add(agent, "file.changed", { callId: c, path: file, before: "a".repeat(64), after: "b".repeat(64) })
    return c
  }
  let turn = 0
  while (seq < target - 40) {
    turn++
    add("main", "user.message", {
      text: turn === 1 ? "keep the test suite green" : `Crew reports:\n[notable] worker-1: ${text(12)}`
    })
    for (let i = 0; i < 3; i++) toolStep("main")
    for (const m of members) {
      if (seq >= target - 40) break
      const task = `main:call_${call}`
      add(m, "crew.task.received", { id: task, kind: "task", from: "main", text: text(15) })
      add(m, "user.message", { text: text(15) })
      const steps = 8 + Math.floor(rand() * 12)
      for (let i = 0; i < steps; i++) toolStep(m)
      const r = `call_${++call}`
      const rs = add(m, "tool.started", {
        callId: r,
        tool: "report",
        effect: "read",
        summary: "report notable",
        params: { importance: "notable", text: text(20) }
      })
      add(m, "tool.completed", { callId: r, tool: "report", isFailure: false, result: { delivered: "notable" } }, rs)
      add(m, "turn.completed", { status: "completed", text: text(10), steps, toolCalls: steps })
      add(m, "crew.review.requested", { reviewer: "reviewer-1", taskId: task, round: 1 })
      add("reviewer-1", "crew.task.received", {
        id: `${m}:${task}:review-1`,
        kind: "review",
        from: m,
        text: `--- a/x\n+++ b/x\n${text(10)}`
      })
      toolStep("reviewer-1")
      const v = `call_${++call}`
      const vs = add("reviewer-1", "tool.started", {
        callId: v,
        tool: "verdict",
        effect: "read",
        summary: `verdict for ${m}: approve`,
        params: { worker: m, verdict: "approve", critique: text(25) }
      })
      add(
        "reviewer-1",
        "tool.completed",
        { callId: v, tool: "verdict", isFailure: false, result: { verdict: "approve" } },
        vs
      )
      add(m, "crew.verdict.received", {
        id: `reviewer-1:${v}`,
        kind: "verdict",
        from: "reviewer-1",
        text: text(25),
        data: { verdict: "approve" }
      })
      add(m, "crew.task.done", {
        taskId: task,
        status: "completed",
        text: text(10),
        review: { verdict: "approve", rounds: 1 }
      })
      add("main", "crew.reports", {
        id: `${m}:${r}`,
        from: "crew",
        text: `Crew reports:\n[notable] ${m}: ${text(12)}`,
        ids: [`${m}:${r}`]
      })
      const g = `call_${++call}`
      const gs = add("main", "tool.started", {
        callId: g,
        tool: "worktree_merge",
        effect: "write",
        summary: `merge the work of ${m}`,
        params: { agent: m }
      })
      at += step()
      add(
        "main",
        "tool.completed",
        {
          callId: g,
          tool: "worktree_merge",
          isFailure: false,
          result: { _tag: "Merged", agent: m, into: "main", commit: "0123456789abcdef" }
        },
        gs
      )
      if ((context.get(m) ?? 0) > 150_000) {
        add(m, "context.compacted", { before: context.get(m), after: 40_000 })
        context.set(m, 40_000)
      }
    }
    add("main", "turn.completed", { status: "completed", text: text(20), steps: 3, toolCalls: 3 })
  }
  fs.writeFileSync(path.join(dir, `${session}.jsonl`), `${lines.join("\n")}\n`, { mode: 0o600 })
  context = new Map()
  return { session, bytes: lines.reduce((n, l) => n + l.length + 1, 0), events: lines.length }
}
