/**
 * Run the custom agent from the command line.
 *
 * ```sh
 * pnpm --filter @musekit/example-custom-agent start                       # demo: no key needed
 * pnpm --filter @musekit/example-custom-agent start -- "task" --dir ../my-repo --model anthropic/claude-sonnet-4-5
 * ```
 */
import { runAgent } from "./agent.js"
import { demoModel, makeDemoRepo } from "./demo.js"

const args = process.argv.slice(2).filter((a) => a !== "--")
const flag = (name: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? args.splice(i, 2)[1] : undefined
}
const model = flag("model") ?? process.env.MUSE_MODEL
const dir = flag("dir")
const task = args.join(" ") || "The unit test fails. Fix it."
const demo = model === undefined

if (demo) process.stdout.write("No --model given: running the demo (a scripted model fixes a failing test).\n\n")
const repo = dir ?? makeDemoRepo()
const result = await runAgent({
  task,
  dir: repo,
  model: model ?? "scripted/demo",
  languageModel: demo ? demoModel() : undefined,
  onText: (d) => process.stdout.write(d)
})
process.stdout.write(`\n\n${result.status} after ${result.steps} model calls and ${result.toolCalls} tool calls`)
process.stdout.write(
  ` (session ${result.session}; inspect it with: pnpm muse log ${result.session})\nrepository: ${repo}\n`
)
process.exitCode = result.status === "completed" ? 0 : 1
