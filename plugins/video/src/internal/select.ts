/** Pure frame-selection rules: which scene frames to keep, where to add evenly spaced ones. */

export interface Candidate {
  /** Index of the selected frame in ffmpeg's output (0-based; file `scene_<n+1>.jpg`). */
  readonly n: number
  /** Seconds from the start of the video. */
  readonly time: number
  /** Scene-change score 0..1 (the first frame scores 0). */
  readonly score: number
}

const nearest = (t: number, times: ReadonlyArray<number>): number =>
  times.reduce((d, x) => Math.min(d, Math.abs(x - t)), Number.POSITIVE_INFINITY)

/**
 * At most `max` scene frames: the first frame always (the opening shot), then the strongest cuts
 * that keep at least half an even spacing from the ones already kept, then — if that left room —
 * the frames farthest from everything kept. Returned in time order.
 */
export const pickScenes = (
  candidates: ReadonlyArray<Candidate>,
  max: number,
  duration: number
): ReadonlyArray<Candidate> => {
  const byTime = [...candidates].sort((a, b) => a.time - b.time || a.n - b.n)
  if (byTime.length <= max) return byTime
  if (max <= 0) return []
  const chosen: Array<Candidate> = [byTime[0]!]
  const rest = byTime.slice(1)
  const minGap = duration > 0 ? duration / (2 * max) : 0
  const byScore = [...rest].sort((a, b) => b.score - a.score || a.time - b.time)
  for (const c of byScore) {
    if (chosen.length >= max) break
    if (
      nearest(
        c.time,
        chosen.map((x) => x.time)
      ) >= minGap
    )
      chosen.push(c)
  }
  while (chosen.length < max) {
    let best: Candidate | undefined
    let bestDistance = -1
    for (const c of byScore) {
      if (chosen.includes(c)) continue
      const d = nearest(
        c.time,
        chosen.map((x) => x.time)
      )
      if (d > bestDistance) {
        best = c
        bestDistance = d
      }
    }
    if (!best) break
    chosen.push(best)
  }
  return chosen.sort((a, b) => a.time - b.time)
}

/**
 * Times for evenly spaced frames that bring `existing` up to `min` frames: points of the grid
 * `i * duration / min` that are not within half a spacing of an existing frame, farthest first.
 * Returned in time order. Each existing frame blocks at most one grid point, so there are always
 * enough points.
 */
export const fillTimes = (existing: ReadonlyArray<number>, min: number, duration: number): ReadonlyArray<number> => {
  const need = min - existing.length
  if (need <= 0 || !(duration > 0)) return []
  const spacing = duration / min
  const grid = Array.from({ length: min }, (_, i) => i * spacing)
  const open = grid.filter((t) => nearest(t, existing) >= spacing / 2)
  const taken: Array<number> = []
  while (taken.length < need && open.length > 0) {
    let bestIndex = 0
    let bestDistance = -1
    open.forEach((t, i) => {
      const d = nearest(t, [...existing, ...taken])
      if (d > bestDistance) {
        bestIndex = i
        bestDistance = d
      }
    })
    taken.push(open.splice(bestIndex, 1)[0]!)
  }
  return taken.sort((a, b) => a - b)
}
