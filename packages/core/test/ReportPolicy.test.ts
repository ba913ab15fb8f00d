import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { ReportPolicy } from "../src/index.js"

const report = (id: string, importance: ReportPolicy.Importance, text = id): ReportPolicy.Report => ({
  id,
  from: "worker-1",
  importance,
  text
})

describe("ReportPolicy", () => {
  it.effect("blocking at the next boundary, info folded into a digest, notable at most once every N boundaries", () =>
    Effect.gen(function* () {
      const p = ReportPolicy.make({ digestSize: 3, notableEvery: 3 })
      yield* p.offer(report("i1", "info"))
      yield* p.offer(report("i2", "info"))
      expect(Option.isNone(yield* p.take)).toBe(true) // 2 infos: below the digest size
      yield* p.offer(report("b1", "blocking", "which database?"))
      const first = Option.getOrThrow(yield* p.take)
      expect(first.text).toContain("[blocking] worker-1: which database?")
      expect(first.text).toContain("Digest of 2 info reports")
      expect(first.ids).toEqual(["i1", "i2", "b1"])

      yield* p.offer(report("n1", "notable"))
      expect(Option.getOrThrow(yield* p.take).ids).toEqual(["n1"]) // first notable goes at once
      yield* p.offer(report("n2", "notable"))
      // wake-ups of a waiting main agent are not boundaries: they do not make notables come sooner
      for (let i = 0; i < 5; i++) expect(Option.isNone(yield* p.due)).toBe(true)
      expect(Option.isNone(yield* p.take)).toBe(true)
      expect(Option.isNone(yield* p.take)).toBe(true)
      expect(Option.getOrThrow(yield* p.take).ids).toEqual(["n2"]) // the third boundary after the last one

      // a report delivered before a resume is not delivered again
      yield* p.delivered(["i9"])
      yield* p.offer(report("i9", "info"))
      expect(yield* p.pending).toBe(0)
      yield* p.offer(report("i10", "info"))
      expect(Option.getOrThrow(yield* p.flush).text).toContain("Digest of 1 info report")
    })
  )
})
