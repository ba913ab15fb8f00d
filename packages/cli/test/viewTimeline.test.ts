/**
 * The fold behind `muse view`: what each kind of event becomes on the timeline (waits, denials,
 * rejections, interruptions, resumes after a crash, rewinds, compactions, failures), how the
 * fold hands out what changed (the live page's updates), and that recorded text is made visible
 * (a bidi override in a file name shows as its escape).
 */
import type { Event } from "@musekit/core"
import { describe, expect, it } from "vitest"
import * as Details from "../src/internal/view/details.js"
import { Timeline } from "../src/internal/view/timeline.js"

const T0 = Date.UTC(2026, 11, 1, 9, 0, 0)

const log = (drafts: ReadonlyArray<readonly [number, string, string, unknown, string?]>): Array<Event.Envelope> =>
  drafts.map(([ms, agent, type, data, parent], seq) => ({
    v: 1,
    seq,
    id: `e${seq}`,
    at: T0 + ms,
    agent,
    parent: parent ?? null,
    type,
    data
  }))

const events = log([
  [
    0,
    "main",
    "session.started",
    { title: "t", config: { title: "t", model: "anthropic/claude-sonnet-4-5", root: "/r" } }
  ],
  [1, "main", "user.input", { text: "go" }],
  [2, "main", "user.message", { text: "go" }],
  [3, "main", "model.requested", { model: "anthropic/claude-sonnet-4-5", messages: 1, appended: [] }],
  [
    1003,
    "main",
    "model.responded",
    {
      model: "anthropic/claude-sonnet-4-5",
      text: "",
      toolCalls: [{ id: "c1", name: "run_shell" }],
      usage: { inputTokens: 10000, outputTokens: 500, cachedInputTokens: 8000 }
    }
  ],
  [1004, "main", "approval.requested", { callId: "c1", tool: "run_shell", summary: "rm -rf build" }],
  [9004, "main", "approval.answered", { callId: "c1", allow: false, scope: "once", reason: "no" }],
  [
    9005,
    "main",
    "approval.decided",
    { callId: "c2", tool: "run_shell", summary: "curl x", allow: false, by: "rule", rule: "deny curl" }
  ],
  [9006, "main", "tool.rejected", { callId: "c3", tool: "nope", reason: "unknown tool" }],
  [
    9007,
    "main",
    "tool.started",
    { callId: "c4", tool: "edit_file", summary: "edit_file a\u202etxt.js", params: { path: "a\u202etxt.js" } }
  ],
  [9100, "main", "model.requested", { model: "anthropic/claude-sonnet-4-5" }],
  [9200, "main", "turn.interrupted", { reason: "stopped by SIGTERM" }],
  [
    60000,
    "main",
    "tool.completed",
    { callId: "c4", tool: "edit_file", isFailure: true, result: { error: "interrupted" }, settled: "interrupted" }
  ],
  [60001, "main", "turn.resumed", { reason: "the session was resumed" }],
  [60002, "worktree", "worktree.reattached", { worktrees: [{ agent: "worker-1", status: "recreated" }] }],
  [60002, "main", "model.requested", { model: "anthropic/claude-sonnet-4-5" }],
  [60003, "main", "model.failed", { error: "overloaded" }],
  [60004, "main", "context.compacted", { before: 150000, after: 40000 }],
  [60005, "main", "rewind.started", { to: 3, files: [{ agent: "main", path: "a.js" }] }],
  [60105, "main", "rewind.completed", { restored: [], kept: [], failed: [] }],
  [60106, "worker-1", "crew.spawned", { role: "worker" }],
  [60107, "worker-1", "crew.member.failed", { error: "out of memory" }]
])

describe("the timeline fold", () => {
  const t = new Timeline("s")
  for (const e of events) t.add(e)
  const kinds = (k: string) => t.marks.filter((m) => m.kind === k)

  it("turns waits, denials, rejections, interruptions, resumes, rewinds and failures into marks", () => {
    expect(t.lanes.map((l) => [l.name, l.role])).toEqual([
      ["main", "main"],
      ["worktree", "helper"],
      ["worker-1", "worker"]
    ])
    // the wait for a person's answer: a bar from the question to the answer, denied
    const [wait, ruled] = kinds("approval")
    expect(wait).toMatchObject({ start: 1004, end: 9004, status: "denied" })
    expect(wait!.label).toBe("denied (once) · run_shell rm -rf build")
    expect(ruled).toMatchObject({ status: "denied", label: "denied by rule deny curl: run_shell curl x" })
    expect(kinds("tool").find((m) => m.label.startsWith("rejected"))?.status).toBe("failed")
    // the model call the stop cut short got no answer (it was sent again after the restart, and failed)
    const models = kinds("model")
    expect(models.map((m) => [m.status, m.start, m.end])).toEqual([
      ["ok", 3, 1003],
      ["interrupted", 9100, 60002],
      ["failed", 60002, 60003]
    ])
    expect(models[2]!.label).toBe("model error: overloaded")
    // the interruption, the tool the restart settled, the resumed turn, the rebuilt worktree
    expect(kinds("interrupt").map((m) => m.label)).toEqual(["interrupted: stopped by SIGTERM"])
    expect(kinds("resume").map((m) => m.label)).toEqual([
      "interrupted after a restart: edit_file a\\u202etxt.js",
      "resumed: the session was resumed",
      "worktrees after a restart: worker-1 recreated"
    ])
    const edit = kinds("tool").find((m) => m.label.startsWith("edit_file"))!
    expect(edit).toMatchObject({ status: "interrupted", start: 9007, end: 60000 })
    expect(kinds("resume")[0]!.link).toBe(edit.id)
    expect(kinds("compaction")[0]!.label).toBe("context compacted: 150000 → 40000 tokens")
    expect(kinds("rewind")[0]).toMatchObject({ start: 60005, end: 60105, status: "ok", files: ["a.js"] })
    expect(kinds("failure")[0]).toMatchObject({ lane: 2, status: "failed", label: "failed: out of memory" })
    // usage: one point per response, with its price
    expect(t.usage).toHaveLength(1)
    expect(t.usage[0]).toMatchObject({ t: 1003, input: 10000, output: 500, cached: 8000 })
    expect(t.usage[0]!.cost).toBeGreaterThan(0)
  })

  it("shows a control or bidi character in recorded text as its escape", () => {
    const edit = kinds("tool").find((m) => m.label.startsWith("edit_file"))!
    expect(edit.files).toEqual(["a\\u202etxt.js"])
    expect(edit.label).not.toMatch(/\u202e/)
    const detail = Details.of(edit, t)
    expect(JSON.stringify(detail)).not.toMatch(/\u202e/)
    expect(detail.sections.find((s) => s.title === "input")?.text).toContain("a\\u202etxt.js")
  })

  it("hands out each change once: a mark when it opens, again when it closes", () => {
    const live = new Timeline("s")
    for (const e of events.slice(0, 4)) live.add(e)
    const first = live.changes()
    expect(first.marks.map((m) => [m.kind, m.status])).toEqual([
      ["input", "ok"],
      ["turn", "open"],
      ["model", "open"]
    ])
    expect(first.lanes.map((l) => l.name)).toEqual(["main"])
    expect(live.changes()).toEqual({ marks: [], usage: [], lanes: [] })
    live.add(events[4]!)
    const next = live.changes()
    expect(next.marks.map((m) => [m.kind, m.status, m.end])).toEqual([["model", "ok", 1003]])
    expect(next.usage).toHaveLength(1)
  })
})
