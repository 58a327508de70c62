/*
 * Paging through a listing by page tokens: the token of every page shown
 * so far (the first page's is ''), and the next page's token from the last
 * answer ('' at the end). Prev pops, Next pushes. Pure: no DOM.
 */
export class PageTokens {
  constructor() { this.reset(); }

  /** Back to the first page. */
  reset() {
    this.tokens = [''];
    this.next = '';
  }

  /** The token that asks for the current page. */
  current() { return this.tokens[this.tokens.length - 1]; }

  /** The current page's number, from 1. */
  get page() { return this.tokens.length; }

  get hasPrev() { return this.tokens.length > 1; }
  get hasNext() { return !!this.next; }

  /** Moves to the next page (true) when there is one. */
  forward() {
    if (!this.next) return false;
    this.tokens.push(this.next);
    return true;
  }

  /** Moves to the previous page (true) when there is one. */
  back() {
    if (this.tokens.length <= 1) return false;
    this.tokens.pop();
    return true;
  }
}
