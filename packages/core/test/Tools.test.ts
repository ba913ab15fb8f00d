import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Agent, EventLog, Tools } from "../src/index.js"
import { layerAgentTest, Scripted } from "../src/testing.js"

/** A tool described by a raw JSON schema, with a hand-written validator (a real one would be Ajv). */
const sum = (calls: Array<unknown>) =>
  Tools.fromJsonSchema({
    name: "sum",
    description: "Add two numbers",
    jsonSchema: {
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"]
    },
    validate: (p) => (typeof p.a === "number" && typeof p.b === "number" ? undefined : "a and b must be numbers"),
    effect: "read",
    handler: (p) =>
      Effect.sync(() => {
        calls.push(p)
        return { sum: (p.a as number) + (p.b as number) }
      })
  })

describe("Tools.fromJsonSchema", () => {
  it("the model sees the JSON schema as given; arguments that fail the validator never reach the handler", async () => {
    const calls: Array<unknown> = []
    const tool = sum(calls)
    expect(tool.jsonSchema).toEqual({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"]
    })
    expect(tool.idempotent).toBe(true)
    const script = [
      Scripted.toolCalls([{ id: "bad", name: "sum", params: { a: 1, b: "2" } }]),
      Scripted.toolCalls([{ id: "good", name: "sum", params: { a: 1, b: 2 } }]),
      Scripted.text("3")
    ]
    const events = await Effect.runPromise(
      Effect.gen(function* () {
        const agent = yield* Agent.make({ name: "main", instructions: "test" })
        yield* agent.send("add")
        return yield* EventLog.readAll(yield* EventLog.EventLog)
      }).pipe(Effect.provide(layerAgentTest({ script, tools: [tool] })))
    )
    const rejected = events.find((e) => e.type === "tool.rejected")!.data as { reason: string }
    expect(rejected.reason).toContain("invalid arguments for sum")
    expect(rejected.reason).toContain("a and b must be numbers")
    expect(calls).toEqual([{ a: 1, b: 2 }])
    const done = events.find((e) => e.type === "tool.completed")!.data as { result: unknown }
    expect(done.result).toEqual({ sum: 3 })
  })

  it("names are checked as for any tool", () => {
    expect(() => Tools.fromJsonSchema({ ...sum([]), name: "bash", jsonSchema: {}, validate: () => undefined })).toThrow(
      /reserved/
    )
    expect(() =>
      Tools.fromJsonSchema({ ...sum([]), name: "has space", jsonSchema: {}, validate: () => undefined })
    ).toThrow(/must match/)
  })
})
