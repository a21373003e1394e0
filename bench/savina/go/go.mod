module savina

go 1.19
