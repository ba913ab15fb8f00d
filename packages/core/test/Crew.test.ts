import { describe, expect, it } from "@effect/vitest"
import { Effect, type Layer, Schema } from "effect"
import { Agent, Crew, type Event, EventLog, Model, type Recorder, Session, Tools } from "../src/index.js"
import { layerAgentServices, type RouteContext, routed, Scripted, scriptedModel } from "../src/testing.js"

const MAIN = "You lead a crew."

/** A write tool that returns a diff, as the Node edit tools do. */
const noteTools = (notes: Map<string, string>) => [
  Tools.make({
    name: "write_note",
    description: "Write a note",
    parameters: { name: Schema.String, text: Schema.String },
    effect: "write",
    handler: ({ name, text }) =>
      Effect.sync(() => {
        const before = notes.get(name) ?? ""
        notes.set(name, text)
        return { path: name, diff: `--- ${name}\n-${before}\n+${text}` }
      })
  }),
  Tools.make({
    name: "pause",
    description: "Wait a little",
    parameters: { ms: Schema.Number },
    effect: "read",
    handler: ({ ms }) => Effect.as(Effect.sleep(ms), { waited: ms })
  })
]

const crewProgram = (languageModel: Layer.Layer<any>, notes: Map<string, string>, task: string) =>
  Effect.gen(function* () {
    const crew = yield* Crew.make()
    const main = yield* Agent.make({ name: "main", instructions: MAIN, extraTools: crew.tools, inbox: crew.inbox })
    yield* main.send(task)
    yield* crew.run(main)
    yield* crew.shutdown
    return { status: yield* crew.status, history: yield* main.history }
  }).pipe(
    Effect.scoped,
    Effect.provide(layerAgentServices({ languageModel, tools: noteTools(notes) }))
  ) as Effect.Effect<
    { status: ReadonlyArray<Crew.MemberInfo>; history: ReadonlyArray<unknown> },
    unknown,
    Recorder.Recorder
  >

const recordLive = <A, E>(p: Effect.Effect<A, E, any>) =>
  Effect.gen(function* () {
    const result = yield* Session.run(p)
    return { result, events: yield* EventLog.readAll(yield* EventLog.EventLog) }
  }).pipe(Effect.provide(EventLog.layerMemory("crew"))) as Effect.Effect<
    { result: A; events: ReadonlyArray<Event.Envelope> },
    E
  >

/** Main delegates two tasks; workers write; the reviewer asks worker-1 for one revision. */
const teamScript = routed({
  main: (c: RouteContext) => {
    if (c.turn === 0) {
      return Scripted.toolCalls([
        { id: "d1", name: "delegate", params: { to: "worker", task: "write note a" } },
        { id: "d2", name: "delegate", params: { to: "worker", task: "write note b" } }
      ])
    }
    return Scripted.text(`ack ${c.turn}`)
  },
  worker: (c) => {
    const last = c.lastUser
    if (c.lastResults.length > 0) return Scripted.text(`done: ${last.slice(0, 40)}`)
    if (last.startsWith("The reviewer")) {
      return Scripted.toolCalls([{ name: "write_note", params: { name: "a", text: "A, revised" } }])
    }
    const name = last.endsWith("a") ? "a" : "b"
    return Scripted.toolCalls([{ name: "write_note", params: { name, text: name.toUpperCase() } }])
  },
  reviewer: (c) => {
    if (c.lastResults.length > 0) return Scripted.text("reviewed")
    const worker = /change by ([\w-]+) \(round (\d+)\)/.exec(c.lastUser)!
    const requestChanges = worker[1] === "worker-1" && worker[2] === "1"
    return Scripted.toolCalls([
      {
        name: "verdict",
        params: {
          worker: worker[1],
          verdict: requestChanges ? "request-changes" : "approve",
          critique: requestChanges ? "say it was revised" : "fine"
        }
      }
    ])
  }
})

describe("Crew", () => {
  it.live(
    "main, two workers and a reviewer work concurrently, review gates the change, and the run replays exactly",
    () =>
      Effect.gen(function* () {
        const notes = new Map<string, string>()
        const { result, events } = yield* recordLive(
          crewProgram(scriptedModel([teamScript]).layer, notes, "split the work")
        )
        expect(notes.get("a")).toBe("A, revised")
        expect(notes.get("b")).toBe("B")
        expect(result.status.map((m) => m.name).sort()).toEqual(["reviewer-1", "worker-1", "worker-2"])
        const agents = new Set(events.map((e) => e.agent))
        expect([...agents].sort()).toEqual(["main", "reviewer-1", "worker-1", "worker-2"])

        // the revision happened before the change was reported
        const done1 = events.find((e) => e.agent === "worker-1" && e.type === "crew.task.done")!
        expect(done1.data).toMatchObject({ review: { verdict: "approve", rounds: 2 } })
        const revised = events.find(
          (e) => e.agent === "worker-1" && e.type === "tool.completed" && JSON.stringify(e.data).includes("revised")
        )!
        expect(revised.seq).toBeLessThan(done1.seq)
        const verdicts = events
          .filter((e) => e.type === "crew.verdict.received")
          .map((e) => (e.data as any).data.verdict)
        expect(verdicts.sort()).toEqual(["approve", "approve", "request-changes"])
        // reports reached main as messages
        const reports = events.filter(
          (e) => e.agent === "main" && (e.type === "crew.reports" || e.type === "inbox.delivered")
        )
        const reportText = reports.map((e) => (e.data as any).text).join("\n")
        expect(reportText).toContain(
          "worker-1: finished task main:d1 with status completed (review: approve after 2 round(s))"
        )
        expect(reportText).toContain(
          "worker-2: finished task main:d2 with status completed (review: approve after 1 round(s))"
        )

        // replay: no model, no tools, same bytes
        const replayNotes = new Map<string, string>()
        const report = yield* Session.replay(
          crewProgram(Model.layerLanguageModelForbidden, replayNotes, "split the work"),
          {
            events,
            verify: true
          }
        )
        expect(report.matched).toBe(events.length)
        expect(replayNotes.size).toBe(0)
      })
  )

  it.live(
    "a verdict for a worker that is not waiting is refused; a review that ends without one does not leave the worker waiting",
    () =>
      Effect.gen(function* () {
        const script = routed({
          main: (c) =>
            c.turn === 0
              ? Scripted.toolCalls([
                  { id: "d1", name: "delegate", params: { to: "worker", task: "write note a" } },
                  { id: "d2", name: "delegate", params: { to: "worker", task: "write note b" } }
                ])
              : Scripted.text(`ack ${c.turn}`),
          worker: (c) => {
            if (c.lastResults.length > 0) return Scripted.text(`done: ${c.lastUser.slice(0, 40)}`)
            const name = c.lastUser.endsWith("a") ? "a" : "b"
            return Scripted.toolCalls([{ name: "write_note", params: { name, text: name.toUpperCase() } }])
          },
          // a confused reviewer: names a worker that does not exist, then ends without a verdict
          reviewer: (c) =>
            c.lastResults.length > 0
              ? Scripted.text("looks fine to me")
              : Scripted.toolCalls([
                  { name: "verdict", params: { worker: "worker-9", verdict: "approve", critique: "ok" } }
                ])
        })
        const notes = new Map<string, string>()
        const { events } = yield* recordLive(crewProgram(scriptedModel([script]).layer, notes, "split the work"))
        const refused = events.filter(
          (e) => e.type === "tool.completed" && e.agent === "reviewer-1" && (e.data as any).tool === "verdict"
        )
        expect(refused).toHaveLength(2)
        for (const e of refused) {
          expect((e.data as any).isFailure).toBe(true)
          expect(JSON.stringify(e.data)).toContain("worker-9 is not waiting for a verdict from reviewer-1")
        }
        // both workers got "no verdict", finished, and reported
        const done = events.filter((e) => e.type === "crew.task.done")
        expect(done.map((e) => (e.data as any).review)).toEqual([
          { verdict: "none", rounds: 1 },
          { verdict: "none", rounds: 1 }
        ])
        const report = yield* Session.replay(
          crewProgram(Model.layerLanguageModelForbidden, new Map(), "split the work"),
          { events, verify: true }
        )
        expect(report.matched).toBe(events.length)
      })
  )

  it.live("a review for a stopped reviewer is answered with no verdict; the crew lists members by name", () =>
    Effect.gen(function* () {
      const script = routed({
        main: (c) => {
          if (c.turn === 0) {
            return Scripted.toolCalls([
              { id: "m", name: "message", params: { to: "reviewer-1", text: "hello" } },
              { id: "s", name: "crew_stop", params: { name: "reviewer-1" } }
            ])
          }
          if (c.turn === 1) {
            return Scripted.toolCalls([{ id: "d", name: "delegate", params: { to: "worker", task: "write note a" } }])
          }
          if (c.turn === 2) return Scripted.toolCalls([{ id: "st", name: "crew_status", params: {} }])
          return Scripted.text(`ack ${c.turn}`)
        },
        worker: (c) =>
          c.lastResults.length > 0
            ? Scripted.text("wrote a")
            : Scripted.toolCalls([{ name: "write_note", params: { name: "a", text: "A" } }]),
        reviewer: () => Scripted.text("hello")
      })
      const { events } = yield* recordLive(crewProgram(scriptedModel([script]).layer, new Map(), "go"))
      const done = events.find((e) => e.type === "crew.task.done")!
      expect((done.data as any).review).toEqual({ verdict: "none", rounds: 1 })
      const verdict = events.find((e) => e.type === "crew.verdict.received")!
      expect((verdict.data as any).text).toBe("reviewer-1 is stopped; no verdict")
      const status = events.find((e) => e.type === "tool.completed" && (e.data as any).tool === "crew_status")
      const names = ((status?.data as any)?.result?.members ?? []).map((m: Crew.MemberInfo) => m.name)
      expect(names.length).toBeGreaterThan(1)
      expect(names).toEqual([...names].sort())
      const report = yield* Session.replay(crewProgram(Model.layerLanguageModelForbidden, new Map(), "go"), {
        events,
        verify: true
      })
      expect(report.matched).toBe(events.length)
    })
  )

  it.live("100 info reports reach the main agent as a few digests", () =>
    Effect.gen(function* () {
      const script = routed({
        main: (c) =>
          c.turn === 0
            ? Scripted.toolCalls([{ name: "delegate", params: { to: "explorer", task: "count" } }])
            : Scripted.text("noted"),
        explorer: (c) => {
          if (c.turn < 10) {
            return Scripted.toolCalls(
              Array.from({ length: 10 }, (_, i) => ({
                id: `r${c.turn}-${i}`,
                name: "report",
                params: { importance: "info", text: `progress ${c.turn * 10 + i + 1}` }
              }))
            )
          }
          return Scripted.text("counted to 100")
        }
      })
      const { events } = yield* recordLive(crewProgram(scriptedModel([script]).layer, new Map(), "go"))
      const deliveries = events.filter(
        (e) => e.agent === "main" && (e.type === "crew.reports" || e.type === "inbox.delivered")
      )
      const text = deliveries.map((e) => (e.data as any).text as string)
      const counted = text
        .flatMap((t) => [...t.matchAll(/Digest of (\d+) info report/g)])
        .reduce((n, m) => n + Number(m[1]), 0)
      expect(counted).toBe(100)
      expect(deliveries.length).toBeLessThanOrEqual(8)
      expect(deliveries.length).toBeGreaterThanOrEqual(1)
      expect(text.join("\n")).toContain("explorer-1: finished task")
    })
  )

  it.live("a blocking report reaches the main agent at its next boundary, mid-task", () =>
    Effect.gen(function* () {
      const script = routed({
        main: (c) => {
          if (c.turn === 0)
            return Scripted.toolCalls([{ name: "delegate", params: { to: "worker", task: "need help" } }])
          if (c.turn < 8 && !c.prompt.content.some((m) => JSON.stringify(m).includes("[blocking]"))) {
            return Scripted.toolCalls([{ id: `p${c.turn}`, name: "pause", params: { ms: 30 } }])
          }
          return Scripted.text("saw it")
        },
        worker: (c) =>
          c.turn === 0
            ? Scripted.toolCalls([{ name: "report", params: { importance: "blocking", text: "which database?" } }])
            : Scripted.text("waiting for an answer")
      })
      const { events } = yield* recordLive(crewProgram(scriptedModel([script]).layer, new Map(), "start"))
      const mainEvents = events.filter((e) => e.agent === "main")
      const delivered = mainEvents.find((e) => e.type === "inbox.delivered")!
      expect((delivered.data as any).text).toContain("[blocking] worker-1: which database?")
      const firstTurnEnd = mainEvents.find((e) => e.type === "turn.completed")!
      expect(delivered.seq).toBeLessThan(firstTurnEnd.seq)
      expect((firstTurnEnd.data as any).text).toBe("saw it")
    })
  )

  it.live("a crashing member is reported to the main agent and can be restarted", () =>
    Effect.gen(function* () {
      let crashes = 0
      const script = routed({
        main: (c) => {
          if (c.turn === 0) return Scripted.toolCalls([{ name: "delegate", params: { to: "worker", task: "explode" } }])
          if (c.lastUser.includes("crashed") && !c.lastResults.length) {
            return Scripted.toolCalls([{ name: "crew_restart", params: { name: "worker-1" } }])
          }
          return Scripted.text("ok")
        },
        worker: () => {
          crashes++
          throw new Error("worker model exploded")
        }
      })
      const { events, result } = yield* recordLive(crewProgram(scriptedModel([script]).layer, new Map(), "go"))
      const failed = events.find((e) => e.type === "crew.member.failed")!
      expect(failed.agent).toBe("worker-1")
      expect((failed.data as any).error).toContain("worker model exploded")
      const report = events.find((e) => e.agent === "main" && JSON.stringify(e.data).includes("crashed"))!
      expect((report.data as any).text).toContain("[blocking] worker-1: crashed")
      const restart = events.find((e) => e.type === "tool.completed" && (e.data as any).tool === "crew_restart")!
      expect((restart.data as any).result).toEqual({ name: "worker-1", status: "restarted" })
      expect(crashes).toBe(1)
      expect(result.status.find((m) => m.name === "worker-1")!.status).toBe("idle")
    })
  )

  it.live("a reviewer that crashes mid-review releases the worker waiting for its verdict", () =>
    Effect.gen(function* () {
      const script = routed({
        main: (c) =>
          c.turn === 0
            ? Scripted.toolCalls([{ id: "d1", name: "delegate", params: { to: "worker", task: "write note a" } }])
            : Scripted.text("ok"),
        worker: (c) =>
          c.lastResults.length > 0
            ? Scripted.text("wrote a")
            : Scripted.toolCalls([{ name: "write_note", params: { name: "a", text: "A" } }]),
        reviewer: () => {
          throw new Error("reviewer model exploded")
        }
      })
      const { events } = yield* recordLive(crewProgram(scriptedModel([script]).layer, new Map(), "go"))
      expect(events.find((e) => e.type === "crew.member.failed")?.agent).toBe("reviewer-1")
      const done = events.find((e) => e.type === "crew.task.done")!
      expect((done.data as any).review).toEqual({ verdict: "none", rounds: 1 })
      const verdict = events.find((e) => e.type === "crew.verdict.received")!
      expect((verdict.data as any).text).toContain("reviewer-1 crashed: reviewer model exploded; no verdict")
    })
  )

  it.live("a stopped member restarted by the main agent replays exactly", () =>
    Effect.gen(function* () {
      const script = routed({
        main: (c) => {
          const last = c.lastResults[0]?.name
          if (c.turn === 0) {
            return Scripted.toolCalls([
              { id: "d1", name: "delegate", params: { to: "explorer", task: "look around" } },
              { id: "s1", name: "crew_stop", params: { name: "explorer-1" } }
            ])
          }
          if (c.lastUser.includes("finished task main:d1") && c.lastResults.length === 0) {
            return Scripted.toolCalls([{ id: "r1", name: "crew_restart", params: { name: "explorer-1" } }])
          }
          if (last === "crew_restart") {
            return Scripted.toolCalls([
              { id: "d2", name: "delegate", params: { to: "explorer-1", task: "look again" } }
            ])
          }
          return Scripted.text(`ok ${c.turn}`)
        },
        explorer: (c) => Scripted.text(`looked: ${c.lastUser.slice(0, 20)}`)
      })
      const { events } = yield* recordLive(crewProgram(scriptedModel([script]).layer, new Map(), "go"))
      const restart = events.find((e) => e.type === "tool.completed" && (e.data as any).tool === "crew_restart")!
      expect((restart.data as any).result, JSON.stringify(events.map((e) => `${e.seq} ${e.agent} ${e.type}`))).toEqual({
        name: "explorer-1",
        status: "restarted"
      })
      expect(events.filter((e) => e.type === "crew.spawned" && e.agent === "explorer-1")).toHaveLength(2)
      for (let i = 0; i < 5; i++) {
        const report = yield* Session.replay(crewProgram(Model.layerLanguageModelForbidden, new Map(), "go"), {
          events,
          verify: true
        })
        expect(report.matched).toBe(events.length)
      }
    })
  )

  it.live("a persistent member keeps its conversation across tasks", () =>
    Effect.gen(function* () {
      const sm = scriptedModel([
        routed({
          main: (c) =>
            c.turn === 0
              ? Scripted.toolCalls([
                  { id: "t1", name: "delegate", params: { to: "explorer-1", task: "first task" } },
                  { id: "t2", name: "delegate", params: { to: "explorer-1", task: "second task" } }
                ])
              : Scripted.text("ok"),
          explorer: (c) => Scripted.text(`answer ${c.turn}`)
        })
      ])
      const p = Effect.gen(function* () {
        const crew = yield* Crew.make()
        yield* crew.spawn("explorer")
        const main = yield* Agent.make({ name: "main", instructions: MAIN, extraTools: crew.tools, inbox: crew.inbox })
        yield* main.send("go")
        yield* crew.run(main)
        yield* crew.shutdown
      }).pipe(Effect.scoped, Effect.provide(layerAgentServices({ languageModel: sm.layer })))
      yield* recordLive(p)
      const explorerPrompts = sm.prompts.filter((pr) => JSON.stringify(pr).includes("You are explorer-1"))
      expect(explorerPrompts).toHaveLength(2)
      const second = explorerPrompts[1]!.content.filter((m) => m.role !== "system")
      expect(second.map((m) => m.role)).toEqual(["user", "assistant", "user"])
      // the second request starts with the first byte for byte: what a prompt cache reuses
      expect(JSON.stringify(explorerPrompts[1]!.content.slice(0, 3))).toContain("first task")
    })
  )
})
