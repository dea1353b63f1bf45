"""What the suites share: real event files (``eventfiles``), a throwaway PostgreSQL server
(``pgserver``), store snapshots and factories (``snapshots``), checks for dangling rows
(``storecheck``) and crash injection (``crashpoints``)."""
