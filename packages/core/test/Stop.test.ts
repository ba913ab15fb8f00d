import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option, Schema } from "effect"
import { Agent, Crew, type Event, EventLog, Model, Session, Stop, Tools } from "../src/index.js"
import { layerAgentServices, routed, Scripted, scriptedModel } from "../src/testing.js"

/** `quick` answers at once; `slow` runs until it is interrupted (and says so). */
const tools = (interrupted: Array<string>, started?: Deferred.Deferred<void>) => [
  Tools.make({
    name: "quick",
    description: "Answers at once",
    parameters: { n: Schema.Number },
    effect: "read",
    handler: ({ n }) => Effect.succeed({ n })
  }),
  Tools.make({
    name: "slow",
    description: "Takes forever",
    parameters: { n: Schema.Number },
    effect: "exec",
    handler: ({ n }) =>
      Effect.zipRight(
        started ? Deferred.succeed(started, undefined) : Effect.void,
        Effect.never as Effect.Effect<void>
      ).pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted.push(`slow ${n}`))))
  })
]

const mainScript = routed({
  main: (c) =>
    c.turn === 0
      ? Scripted.toolCalls([
          { id: "c1", name: "quick", params: { n: 1 } },
          { id: "c2", name: "slow", params: { n: 2 } },
          { id: "c3", name: "quick", params: { n: 3 } }
        ])
      : Scripted.text(`results: ${JSON.stringify(c.lastResults.map((r) => [r.name, r.isFailure]))}`)
})

const data = (e: Event.Envelope) => e.data as any

describe("Stop", () => {
  it.live("a stop mid-tool settles the tool with an outcome and ends the turn; replay stops at the same point", () =>
    Effect.gen(function* () {
      const interrupted: Array<string> = []
      const started = yield* Deferred.make<void>()
      const stop = yield* Stop.make
      const sm = scriptedModel([mainScript])
      const services = (lm: Layer.Layer<any>, tl: ReadonlyArray<Tools.Definition>, s: Stop.Service) =>
        Layer.merge(layerAgentServices({ languageModel: lm, tools: tl }), Layer.succeed(Stop.Stop, s))
      const turn = Effect.gen(function* () {
        const agent = yield* Agent.make({ name: "main", instructions: "Work." })
        const first = yield* agent.send("go")
        const at = yield* agent.interrupted
        return { first, at, agent }
      })
      const { result, events } = yield* Effect.gen(function* () {
        const fiber = yield* Effect.fork(
          Session.run(turn.pipe(Effect.provide(services(sm.layer, tools(interrupted, started), stop))))
        )
        yield* Deferred.await(started)
        yield* stop.request("stopped by the test")
        const result = yield* Fiber.join(fiber)
        return { result, events: yield* EventLog.readAll(yield* EventLog.EventLog) }
      }).pipe(Effect.provide(EventLog.layerMemory("stop")))

      expect(result.first).toMatchObject({ status: "interrupted", reason: "stopped by the test", steps: 1 })
      expect(interrupted).toEqual(["slow 2"])
      const story = events.map((e) => (e.type.startsWith("tool.") ? `${e.type}:${data(e).callId}` : e.type))
      expect(story).toEqual([
        "user.message",
        "prompt.ready",
        "model.requested",
        "model.responded",
        "approval.decided",
        "tool.started:c1",
        "tool.completed:c1",
        "approval.decided",
        "tool.started:c2",
        "tool.completed:c2",
        "turn.interrupted"
      ])
      const c2 = events.find((e) => e.type === "tool.completed" && data(e).callId === "c2")!
      expect(data(c2).isFailure).toBe(true)
      expect(data(c2).result.error).toContain("interrupted (stopped by the test) while slow was running")
      expect(data(events.at(-1)!)).toEqual({ reason: "stopped by the test" })
      expect(sm.calls()).toBe(1)
      expect(Option.isSome(result.at)).toBe(true)

      // the replay serves the tool's outcome and stops where the live run stopped
      const replayed = yield* Session.replay(
        turn.pipe(Effect.provide(services(Model.layerLanguageModelForbidden, tools([]), Stop.never))),
        { events, verify: true }
      )
      expect(replayed.matched).toBe(events.length)
    })
  )

  it.live("the interrupted turn goes on from where it stopped, with the results of the calls that finished", () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      const stop = yield* Stop.make
      const sm = scriptedModel([mainScript])
      const program = Effect.gen(function* () {
        const agent = yield* Agent.make({ name: "main", instructions: "Work." })
        const fiber = yield* Effect.fork(agent.send("go"))
        yield* Deferred.await(started)
        yield* stop.request("stopped by the test")
        yield* Fiber.join(fiber)
        yield* stop.clear
        const at = yield* agent.interrupted
        return yield* agent.resume(Option.getOrThrow(at))
      }).pipe(
        Effect.provide(
          Layer.merge(
            layerAgentServices({ languageModel: sm.layer, tools: tools([], started) }),
            Layer.succeed(Stop.Stop, stop)
          )
        )
      )
      const result = yield* Session.run(program).pipe(Effect.provide(EventLog.layerMemory("stop")))
      expect(result.status).toBe("completed")
      // c1 finished before the stop, c2 was stopped, c3 never ran
      expect(result.text).toBe('results: [["quick",false],["slow",true],["quick",true]]')
      expect(result.steps).toBe(2)
    })
  )

  it.live("a stop while the model answers ends the turn; the request stays in the log without an outcome", () =>
    Effect.gen(function* () {
      const stop = yield* Stop.make
      const { languageModel, requested } = yield* hangingModel
      const program = Effect.gen(function* () {
        const agent = yield* Agent.make({ name: "main", instructions: "Work." })
        return yield* agent.send("go")
      }).pipe(Effect.provide(Layer.merge(layerAgentServices({ languageModel }), Layer.succeed(Stop.Stop, stop))))
      const { result, events } = yield* Effect.gen(function* () {
        const fiber = yield* Effect.fork(Session.run(program))
        yield* Deferred.await(requested)
        yield* stop.request("SIGTERM")
        const result = yield* Fiber.join(fiber)
        return { result, events: yield* EventLog.readAll(yield* EventLog.EventLog) }
      }).pipe(Effect.provide(EventLog.layerMemory("stop")))
      expect(result).toMatchObject({ status: "interrupted", reason: "SIGTERM" })
      expect(events.map((e) => e.type)).toEqual(["user.message", "prompt.ready", "model.requested", "turn.interrupted"])
    })
  )

  it.live("a stop ends every crew member's turn; their reports wait instead of restarting the main agent", () =>
    Effect.gen(function* () {
      const interrupted: Array<string> = []
      const started = yield* Deferred.make<void>()
      const stop = yield* Stop.make
      const sm = scriptedModel([
        routed({
          main: (c) =>
            c.turn === 0
              ? Scripted.toolCalls([{ id: "d1", name: "delegate", params: { to: "worker", task: "take your time" } }])
              : Scripted.text(`main turn ${c.turn}: ${c.lastUser.slice(0, 60)}`),
          worker: (c) =>
            c.lastResults.length === 0
              ? Scripted.toolCalls([{ id: "w1", name: "slow", params: { n: 9 } }])
              : Scripted.text("worker done")
        })
      ])
      const program = Effect.gen(function* () {
        const crew = yield* Crew.make()
        const main = yield* Agent.make({
          name: "main",
          instructions: "Lead.",
          extraTools: crew.tools,
          inbox: crew.inbox
        })
        yield* main.send("split the work")
        const running = yield* Effect.fork(crew.run(main))
        yield* Deferred.await(started)
        yield* stop.request("stopped by the user (Ctrl-C)")
        yield* Fiber.join(running)
        yield* crew.quiet
        const callsAtStop = sm.calls()
        yield* stop.clear
        // the next input of the person: the report that came after the stop reaches the main agent now
        const next = yield* main.send("what happened?")
        yield* crew.shutdown
        return { callsAtStop, next }
      }).pipe(
        Effect.scoped,
        Effect.provide(
          Layer.merge(
            layerAgentServices({ languageModel: sm.layer, tools: tools(interrupted, started) }),
            Layer.succeed(Stop.Stop, stop)
          )
        )
      )
      const { result, events } = yield* Effect.gen(function* () {
        const result = yield* Session.run(program)
        return { result, events: yield* EventLog.readAll(yield* EventLog.EventLog) }
      }).pipe(Effect.provide(EventLog.layerMemory("crew-stop")))
      expect(interrupted).toEqual(["slow 9"])
      const worker = events.filter((e) => e.agent === "worker-1").map((e) => e.type)
      expect(worker).toContain("turn.interrupted")
      expect(events.find((e) => e.type === "crew.task.done")!.data).toMatchObject({ status: "interrupted" })
      // after the stop the main agent was not restarted by the report: its two calls of the first turn,
      // the worker's one, and nothing else until the person's next input
      expect(result.callsAtStop).toBe(3)
      const nextInput = events.findIndex((e) => e.type === "user.message" && data(e).text === "what happened?")
      const mainCalls = events.slice(0, nextInput).filter((e) => e.type === "model.requested" && e.agent === "main")
      expect(mainCalls).toHaveLength(2)
      expect(events.some((e) => e.type === "crew.reports")).toBe(false)
      const delivered = events.find((e) => e.type === "inbox.delivered" && e.agent === "main")!
      expect(data(delivered).text).toContain("with status interrupted")
      expect(result.next.status).toBe("completed")
    })
  )
})

/** A language model that never answers; `requested` completes when it has been asked. */
const hangingModel = Effect.gen(function* () {
  const requested = yield* Deferred.make<void>()
  const { LanguageModel } = yield* Effect.promise(() => import("@effect/ai"))
  const { Stream } = yield* Effect.promise(() => import("effect"))
  const languageModel = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.never,
      streamText: () => Stream.fromEffect(Effect.zipRight(Deferred.succeed(requested, undefined), Effect.never))
    })
  )
  return { languageModel, requested }
})
