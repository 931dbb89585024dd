// The answer as it is being written, rebuilt from the task's token events (specialists with stream:
// true): {step, text} adds to a step, {step, restart: true} voids its text so far, a new attempt voids the
// steps without an llm_call event. The answer is the last step's text.

export class AnswerText {
  constructor() {
    this.steps = new Map();
    this.recorded = new Set();
  }

  apply(event) {
    const step = Number.isInteger(event.data?.step) ? event.data.step : 0;
    if (event.type === "token") {
      if (event.data.restart) this.steps.set(step, "");
      else this.steps.set(step, (this.steps.get(step) ?? "") + (typeof event.data.text === "string" ? event.data.text : ""));
      return true;
    }
    if (event.type === "llm_call") this.recorded.add(step);
    if (event.type === "attempt_started") {
      let changed = false;
      for (const key of [...this.steps.keys()]) {
        if (!this.recorded.has(key)) { this.steps.delete(key); changed = true; }
      }
      return changed;
    }
    return false;
  }

  get step() {
    return this.steps.size ? Math.max(...this.steps.keys()) : null;
  }

  get text() {
    const step = this.step;
    return step === null ? "" : this.steps.get(step);
  }
}
