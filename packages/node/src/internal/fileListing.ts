/**
 * The files under a directory in path order, up to a limit: a walk that honours the ignore files,
 * narrowed to the glob's literal directory, and stopped at the first file past the limit, so a
 * listing costs what it returns rather than what the tree holds.
 *
 * @example
 * ```ts
 * const r = await listTree({ root, startRel: "", glob: "**\/*.md", limit: 1000 })
 * r.files      // ["README.md", "docs/a.md", ...]
 * r.truncated  // true when more files match
 * ```
 */
import { IgnoreFilter, walkSorted } from "./gitignoreWalk.js"
import { planGlob, walkableDir } from "./pathGlob.js"

export interface ListOptions {
  readonly root: string
  /** Workspace-relative directory (`""` = the root). */
  readonly startRel: string
  readonly glob?: string | undefined
  readonly limit: number
  readonly signal?: AbortSignal | undefined
}

export interface Listing {
  readonly files: ReadonlyArray<string>
  /** More files match than `limit`. */
  readonly truncated: boolean
  /** The start directory is ignored by an ignore file; it was listed anyway. */
  readonly startIgnored: boolean
}

export const listTree = async (options: ListOptions): Promise<Listing> => {
  const start = options.startRel === "." ? "" : options.startRel
  const plan = planGlob(start, options.glob)
  const atStart = await IgnoreFilter.load(options.root, start)
  const startIgnored = start !== "" && atStart.ignoresPath(start, true)
  const dir = await walkableDir(options.root, start, plan)
  if (dir === undefined) return { files: [], truncated: false, startIgnored }
  let filter = dir === start ? atStart : await IgnoreFilter.load(options.root, dir)
  if (startIgnored) filter = filter.disabled()
  // the glob's directory itself may be ignored (e.g. "node_modules/**")
  else if (dir !== start && filter.ignoresPath(dir, true, start)) return { files: [], truncated: false, startIgnored }
  const files: Array<string> = []
  let truncated = false
  await walkSorted(
    options.root,
    dir,
    filter,
    (e) => {
      if (!plan.test(e.rel)) return true
      if (files.length >= options.limit) {
        truncated = true
        return false
      }
      files.push(e.rel)
      return true
    },
    { signal: options.signal }
  )
  return { files, truncated, startIgnored }
}
