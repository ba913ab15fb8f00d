import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { Event } from "../src/index.js"

/** The canonical JSON as first specified: one replacer for bigints and non-finite numbers. */
const reference = (value: unknown): string =>
  JSON.stringify(value === undefined ? null : value, (_k, v) => {
    if (typeof v === "bigint") return v.toString()
    if (typeof v === "number" && !Number.isFinite(v)) return null
    return v
  })

const leaf = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme" }),
  fc.double(),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 1e21, 5e-324),
  fc.integer(),
  fc.bigInt(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.date({ noInvalidDate: true }),
  fc.constant(() => 1)
)

const value = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: "small" }, leaf, tie("array"), tie("object")),
  array: fc.array(tie("value"), { maxLength: 5 }),
  object: fc.dictionary(fc.string({ maxLength: 6 }), tie("value"), { maxKeys: 5 })
})).value

describe("Event.canonicalJson", () => {
  it("writes the same text as the replacer it replaces, for any value", () => {
    fc.assert(
      fc.property(value, (v) => {
        expect(Event.canonicalJson(v)).toBe(reference(v))
      }),
      { numRuns: 2_000 }
    )
  })

  it("writes bigints as decimal strings, non-finite numbers and undefined as null", () => {
    expect(Event.canonicalJson({ n: 12345678901234567890n, a: [1n, Number.NaN, undefined], x: undefined })).toBe(
      '{"n":"12345678901234567890","a":["1",null,null]}'
    )
    expect(Event.canonicalJson(undefined)).toBe("null")
    expect(Event.canonicalJson(-Infinity)).toBe("null")
    expect(Event.canonicalJson(7n)).toBe('"7"')
    expect(Event.canonicalJson({ at: new Date(0), n: 1n })).toBe('{"at":"1970-01-01T00:00:00.000Z","n":"1"}')
  })

  it("throws on a cycle, with or without bigints", () => {
    const a: Record<string, unknown> = { n: 1 }
    a.self = a
    expect(() => Event.canonicalJson(a)).toThrow(TypeError)
    const b: Record<string, unknown> = { n: 1n }
    b.self = b
    expect(() => Event.canonicalJson(b)).toThrow(TypeError)
  })
})
