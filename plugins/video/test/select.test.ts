import { describe, expect, it } from "@effect/vitest"
import { fillTimes, pickScenes } from "../src/internal/select.js"

const c = (n: number, time: number, score: number) => ({ n, time, score })

describe("pickScenes", () => {
  it("keeps everything when under the bound", () => {
    const all = [c(0, 0, 0), c(1, 2, 0.5), c(2, 4, 0.9)]
    expect(pickScenes(all, 8, 6)).toEqual(all)
  })

  it("keeps the first frame and the strongest cuts that are well apart, in time order", () => {
    const all = [c(0, 0, 0), c(1, 2, 0.9), c(2, 2.1, 0.95), c(3, 5, 0.2), c(4, 9, 0.5)]
    // minGap = 10 / (2 * 3) ≈ 1.67: 2.1 (0.95) in, 2 (0.9) too close to it, then 9 (0.5) before 5 (0.2)
    expect(pickScenes(all, 3, 10).map((x) => x.n)).toEqual([0, 2, 4])
  })

  it("fills remaining room with the frames farthest from those kept", () => {
    const all = [c(0, 0, 0), c(1, 0.1, 0.9), c(2, 0.2, 0.8), c(3, 0.3, 0.7)]
    expect(pickScenes(all, 3, 10).map((x) => x.n)).toEqual([0, 1, 3]) // ties go to the higher score
  })
})

describe("fillTimes", () => {
  it("evenly spaced when there is only the first frame", () => {
    expect(fillTimes([0], 4, 8)).toEqual([2, 4, 6])
  })

  it("skips grid points next to existing frames and adds only what is missing", () => {
    expect(fillTimes([0, 2, 4], 4, 6)).toEqual([3])
    expect(fillTimes([0, 2, 4], 3, 6)).toEqual([])
  })

  it("nothing for an unknown duration", () => {
    expect(fillTimes([0], 4, 0)).toEqual([])
  })
})
